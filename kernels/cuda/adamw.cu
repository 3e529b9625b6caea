// The optimizer-side kernels on the GPU (twin of kernels/cpu/adamw.cpp), all fp32:
//  - AdamW as torch.optim.AdamW computes it, operation for operation (as the CPU twin does): g = grad *
//    grad_scale (clipping folds in there); p *= 1 - lr*wd; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
//    p -= (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps). The step-dependent factors are
//    computed in double on the host and rounded to float once.
//  - sum of squares in double: a fixed grid of per-block double partials, then one warp adds them in a fixed
//    order, so the global grad norm is deterministic.
//  - y += x (gradient accumulation).
// All three read and write 16 bytes (4 fp32) per access where the buffers are 16-byte aligned.
#include <algorithm>
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

__device__ __forceinline__ void adamw_one(float& param, float grad, float& m, float& v, const AdamWScalars& s) {
  const float g = grad * s.grad_scale;
  const float mi = s.beta1 * m + (1.0f - s.beta1) * g;
  const float vi = s.beta2 * v + (1.0f - s.beta2) * g * g;
  m = mi;
  v = vi;
  const float p = param * s.decay_factor;
  param = p - s.step_size * (mi / (sqrtf(vi) / s.bc2_sqrt + s.eps));
}

// Vector path (vec): the first `head` elements one by one, then 4 per access (float4) from param + head,
// which the launcher checked to be 16-byte aligned for all four buffers (they share their misalignment:
// one segment offset into 256-byte aligned shards), then the last few one by one. Every element gets the
// same arithmetic on either path.
__global__ void adamw_kernel(float* param, const float* grad, float* m, float* v, size_t n, AdamWScalars s, bool vec,
                             size_t head) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t tid = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  size_t done = 0;
  if (vec) {
    if (tid < head) adamw_one(param[tid], grad[tid], m[tid], v[tid], s);
    const size_t n4 = (n - head) / 4;
    float4* p4 = reinterpret_cast<float4*>(param + head);
    float4* m4 = reinterpret_cast<float4*>(m + head);
    float4* v4 = reinterpret_cast<float4*>(v + head);
    const float4* g4 = reinterpret_cast<const float4*>(grad + head);
    for (size_t i = tid; i < n4; i += stride) {
      float4 p = p4[i], mm = m4[i], vv = v4[i];
      const float4 g = g4[i];
      adamw_one(p.x, g.x, mm.x, vv.x, s);
      adamw_one(p.y, g.y, mm.y, vv.y, s);
      adamw_one(p.z, g.z, mm.z, vv.z, s);
      adamw_one(p.w, g.w, mm.w, vv.w, s);
      p4[i] = p;
      m4[i] = mm;
      v4[i] = vv;
    }
    done = head + n4 * 4;
  }
  for (size_t i = done + tid; i < n; i += stride) adamw_one(param[i], grad[i], m[i], v[i], s);
}

// With `vec` (x 16-byte aligned) a thread reads 4 elements per access; the grid and the order in which each
// thread adds its elements depend only on n, so the result repeats bit for bit.
__global__ void sum_squares_partials_kernel(double* partials, const float* x, size_t n, bool vec) {
  __shared__ double warp_sums[kSumThreads / kWarp];
  double acc = 0.0;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t tid = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  size_t done = 0;
  if (vec) {
    const size_t n4 = n / 4;
    for (size_t i = tid; i < n4; i += stride) {
      const float4 q = reinterpret_cast<const float4*>(x)[i];
      acc += static_cast<double>(q.x) * q.x;
      acc += static_cast<double>(q.y) * q.y;
      acc += static_cast<double>(q.z) * q.z;
      acc += static_cast<double>(q.w) * q.w;
    }
    done = n4 * 4;
  }
  for (size_t i = done + tid; i < n; i += stride) {
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

__global__ void accumulate_kernel(float* y, const float* x, size_t n, bool vec) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t tid = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  size_t done = 0;
  if (vec) {
    const size_t n4 = n / 4;
    for (size_t i = tid; i < n4; i += stride) {
      float4 a = reinterpret_cast<float4*>(y)[i];
      const float4 b = reinterpret_cast<const float4*>(x)[i];
      a.x += b.x, a.y += b.y, a.z += b.z, a.w += b.w;
      reinterpret_cast<float4*>(y)[i] = a;
    }
    done = n4 * 4;
  }
  for (size_t i = done + tid; i < n; i += stride) y[i] += x[i];
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
  // The vector path when the four buffers are misaligned alike (elements to peel before a 16-byte boundary).
  const uintptr_t mis = reinterpret_cast<uintptr_t>(param) & 15u;
  const bool vec = mis % sizeof(float) == 0 && (reinterpret_cast<uintptr_t>(grad) & 15u) == mis &&
                   (reinterpret_cast<uintptr_t>(m) & 15u) == mis && (reinterpret_cast<uintptr_t>(v) & 15u) == mis;
  const size_t head = vec ? std::min(n, ((16 - mis) & 15u) / sizeof(float)) : 0;
  adamw_kernel<<<grid_for(vec ? ceil_div(n, 4) : n, 256), 256, 0, stream>>>(param, grad, m, v, n, s, vec, head);
  CUDA_CHECK_LAUNCH();
}

double sum_squares(const float* x, size_t n, void* scratch, cudaStream_t stream) {
  if (n == 0) return 0.0;
  double* partials = static_cast<double*>(scratch);  // (kSumBlocks)
  double* result = partials + kSumBlocks;            // (1)
  sum_squares_partials_kernel<<<kSumBlocks, kSumThreads, 0, stream>>>(partials, x, n, aligned16(x));
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
  const bool vec = aligned16(y) && aligned16(x);
  accumulate_kernel<<<grid_for(vec ? ceil_div(n, 4) : n, 256), 256, 0, stream>>>(y, x, n, vec);
  CUDA_CHECK_LAUNCH();
}

}  // namespace gpt::cuda
