// Host-side fp32 loops over flat buffers: the AdamW update (optionally copying the updated parameters to a
// second fp32 buffer: the cpu twin of the CUDA kernel's bf16 compute copy), the sum of squares for the global
// gradient norm (of one buffer, or of many added in order), and y += x for gradient accumulation. The CPU
// backend runs them on its shards; the CUDA backend runs them on offloaded (host) shards. Each is one
// vectorisable pass over memory split across OpenMP threads.
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
constexpr size_t kSumChunk = 65536;      // sum_squares partial size (fixed, so the result is thread-count free)

// The update loop; with kOut it also copies each updated parameter to out (the compute-dtype copy, which is
// fp32 on the cpu). A template, so the loop without an output is the same vectorised loop as before.
template <bool kOut>
void adamw_loop(float* param, const float* grad, float* m, float* v, float* out, size_t n, float step_size,
                float bc2_sqrt, float decay, float b1, float b2, float eps, float gs) {
  parallel_ranges(n, [=](size_t i0, size_t i1) {
#pragma omp simd
    for (size_t i = i0; i < i1; i++) {
      float g = grad[i] * gs;
      float mi = b1 * m[i] + (1.0f - b1) * g;
      float vi = b2 * v[i] + (1.0f - b2) * g * g;
      m[i] = mi;
      v[i] = vi;
      float p = param[i] * decay;
      const float updated = p - step_size * (mi / (std::sqrt(vi) / bc2_sqrt + eps));
      param[i] = updated;
      if constexpr (kOut) out[i] = updated;
    }
  });
}
}  // namespace

void adamw_update(float* param, const float* grad, float* m, float* v, float* param_out, size_t n,
                  const AdamWParams& hp) {
  GPT_CHECK(hp.step >= 1, "adamw: step must be 1-based, got ", hp.step);
  const double bc1 = 1.0 - std::pow(static_cast<double>(hp.beta1), hp.step);
  const double bc2 = 1.0 - std::pow(static_cast<double>(hp.beta2), hp.step);
  const float step_size = static_cast<float>(hp.lr / bc1);
  const float bc2_sqrt = static_cast<float>(std::sqrt(bc2));
  const float decay = static_cast<float>(1.0 - static_cast<double>(hp.lr) * hp.weight_decay);
  if (param_out)
    adamw_loop<true>(param, grad, m, v, param_out, n, step_size, bc2_sqrt, decay, hp.beta1, hp.beta2, hp.eps,
                     hp.grad_scale);
  else
    adamw_loop<false>(param, grad, m, v, nullptr, n, step_size, bc2_sqrt, decay, hp.beta1, hp.beta2, hp.eps,
                      hp.grad_scale);
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

// The cpu twin of cuda::sum_squares_all: each buffer's sum as sum_squares computes it, added in index order
// from 0 (on the host there is no device wait to save; the op exists so both backends compute the same sum).
double sum_squares_all(const float* const* xs, const size_t* ns, int count) {
  double total = 0.0;
  for (int i = 0; i < count; i++) total += sum_squares(xs[i], ns[i]);
  return total;
}

void accumulate_f32(float* y, const float* x, size_t n, float divisor) {
  parallel_ranges(n, [=](size_t i0, size_t i1) {
#pragma omp simd
    for (size_t i = i0; i < i1; i++) y[i] += x[i] / divisor;  // x / 1 is x: a plain add
  });
}

}  // namespace gpt::cpu
