// The optimizer-side kernels on the GPU (twin of kernels/cpu/adamw.cpp), all fp32:
//  - AdamW as torch.optim.AdamW computes it, operation for operation (as the CPU twin does): g = grad *
//    grad_scale (clipping folds in there); p *= 1 - lr*wd; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
//    p -= (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps). The step-dependent factors are
//    computed in double on the host and rounded to float once.
//  - sum of squares in double: a fixed grid of per-block double partials, then one warp adds them in a fixed
//    order, so the global grad norm is deterministic.
//  - y += x (gradient accumulation).
#include <cmath>

#include "kernels/cuda/ops.cuh"

namespace gpt::cuda {
namespace {

constexpr int kSumBlocks = kSumSquaresBlocks;  // kernels/sizes.h
constexpr int kSumThreads = 256;

struct AdamWScalars {
  float step_size;     // lr / (1 - b1^t)
  float bc2_sqrt;      // sqrt(1 - b2^t)
  float decay_factor;  // 1 - lr * wd
  float beta1, beta2, eps, grad_scale;
};

__global__ void adamw_kernel(float* param, const float* grad, float* m, float* v, size_t n, AdamWScalars s) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const float g = grad[i] * s.grad_scale;
    const float mi = s.beta1 * m[i] + (1.0f - s.beta1) * g;
    const float vi = s.beta2 * v[i] + (1.0f - s.beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    const float p = param[i] * s.decay_factor;
    param[i] = p - s.step_size * (mi / (sqrtf(vi) / s.bc2_sqrt + s.eps));
  }
}

__global__ void sum_squares_partials_kernel(double* partials, const float* x, size_t n) {
  __shared__ double warp_sums[kSumThreads / kWarp];
  double acc = 0.0;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const double xi = x[i];
    acc += xi * xi;
  }
  acc = warp_sum(acc);
  if (threadIdx.x % kWarp == 0) warp_sums[threadIdx.x / kWarp] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    double t = 0.0;
    for (int w = 0; w < kSumThreads / kWarp; w++) t += warp_sums[w];
    partials[blockIdx.x] = t;
  }
}

// One warp: result = sum of the kSumBlocks partials.
__global__ void sum_squares_final_kernel(double* result, const double* partials) {
  double acc = 0.0;
  for (int i = threadIdx.x; i < kSumBlocks; i += kWarp) acc += partials[i];
  acc = warp_sum(acc);
  if (threadIdx.x == 0) *result = acc;
}

__global__ void accumulate_kernel(float* y, const float* x, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    y[i] += x[i];
}

}  // namespace

void adamw_update(float* param, const float* grad, float* m, float* v, size_t n, const AdamWParams& hp,
                  cudaStream_t stream) {
  GPT_CHECK(hp.step >= 1, "adamw: step must be >= 1 (1-based), got ", hp.step);
  if (n == 0) return;
  const double bc1 = 1.0 - std::pow(static_cast<double>(hp.beta1), hp.step);
  const double bc2 = 1.0 - std::pow(static_cast<double>(hp.beta2), hp.step);
  AdamWScalars s;
  s.step_size = static_cast<float>(hp.lr / bc1);
  s.bc2_sqrt = static_cast<float>(std::sqrt(bc2));
  s.decay_factor = static_cast<float>(1.0 - static_cast<double>(hp.lr) * hp.weight_decay);
  s.beta1 = hp.beta1;
  s.beta2 = hp.beta2;
  s.eps = hp.eps;
  s.grad_scale = hp.grad_scale;
  adamw_kernel<<<grid_for(n, 256), 256, 0, stream>>>(param, grad, m, v, n, s);
  CUDA_CHECK_LAUNCH();
}

double sum_squares(const float* x, size_t n, void* scratch, cudaStream_t stream) {
  if (n == 0) return 0.0;
  double* partials = static_cast<double*>(scratch);  // (kSumBlocks)
  double* result = partials + kSumBlocks;            // (1)
  sum_squares_partials_kernel<<<kSumBlocks, kSumThreads, 0, stream>>>(partials, x, n);
  CUDA_CHECK_LAUNCH();
  sum_squares_final_kernel<<<1, kWarp, 0, stream>>>(result, partials);
  CUDA_CHECK_LAUNCH();
  double host = 0.0;
  CUDA_CHECK(cudaMemcpyAsync(&host, result, sizeof(double), cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  return host;
}

void accumulate_f32(float* y, const float* x, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  accumulate_kernel<<<grid_for(n, 256), 256, 0, stream>>>(y, x, n);
  CUDA_CHECK_LAUNCH();
}

}  // namespace gpt::cuda
