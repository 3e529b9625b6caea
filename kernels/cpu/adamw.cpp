// Host-side fp32 loops over flat buffers: the AdamW update, the sum of squares for the global gradient norm,
// and y += x for gradient accumulation. The CPU backend runs them on its shards; the CUDA backend runs them
// on offloaded (host) shards. Each is one vectorisable pass over memory split across OpenMP threads.
//
// AdamW follows torch.optim.AdamW (decoupled weight decay) operation for operation, so the two agree to
// float rounding: g = grad * grad_scale; p *= 1 - lr*wd; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
// p -= (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
#include <algorithm>
#include <cmath>
#include <vector>

#include "src/core/check.h"
#include "kernels/cpu/ops.h"

namespace gpt::cpu {

namespace {
constexpr size_t kParallelMin = 32768;   // below this, thread start-up costs more than the loop
constexpr size_t kSumChunk = 65536;      // sum_squares partial size (fixed, so the result is thread-count free)
}  // namespace

void adamw_update(float* param, const float* grad, float* m, float* v, size_t n, const AdamWParams& hp) {
  GPT_CHECK(hp.step >= 1, "adamw: step must be 1-based, got ", hp.step);
  const double bc1 = 1.0 - std::pow(static_cast<double>(hp.beta1), hp.step);
  const double bc2 = 1.0 - std::pow(static_cast<double>(hp.beta2), hp.step);
  const float step_size = static_cast<float>(hp.lr / bc1);
  const float bc2_sqrt = static_cast<float>(std::sqrt(bc2));
  const float decay = static_cast<float>(1.0 - static_cast<double>(hp.lr) * hp.weight_decay);
  const float b1 = hp.beta1, b2 = hp.beta2, eps = hp.eps, gs = hp.grad_scale;
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (size_t i = 0; i < n; i++) {
    float g = grad[i] * gs;
    float mi = b1 * m[i] + (1.0f - b1) * g;
    float vi = b2 * v[i] + (1.0f - b2) * g * g;
    m[i] = mi;
    v[i] = vi;
    float p = param[i] * decay;
    param[i] = p - step_size * (mi / (std::sqrt(vi) / bc2_sqrt + eps));
  }
}

double sum_squares(const float* x, size_t n) {
  size_t nchunks = (n + kSumChunk - 1) / kSumChunk;
  std::vector<double> part(nchunks);  // (nchunks) one partial per fixed chunk
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (size_t k = 0; k < nchunks; k++) {
    size_t i0 = k * kSumChunk, i1 = std::min(n, i0 + kSumChunk);
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (size_t i = i0; i < i1; i++) s += static_cast<double>(x[i]) * x[i];
    part[k] = s;
  }
  double total = 0.0;
  for (double s : part) total += s;
  return total;
}

void accumulate_f32(float* y, const float* x, size_t n) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (size_t i = 0; i < n; i++) y[i] += x[i];
}

}  // namespace gpt::cpu
