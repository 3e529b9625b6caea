// The optimizer-side kernels on the GPU (twin of kernels/cpu/adamw.cpp), all fp32:
//  - AdamW as torch.optim.AdamW computes it, operation for operation (as the CPU twin does): g = grad *
//    grad_scale (clipping folds in there); p *= 1 - lr*wd; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
//    p -= (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps). The step-dependent factors are
//    computed in double on the host and rounded to float once. With a bf16 output it also writes the
//    updated parameter rounded to bf16 (nearest even, as f32_to_compute rounds), in the same pass: the
//    engine's compute copy (fsdp/geometry.h), so nothing converts the parameters at the next acquire.
//  - sum of squares in double: a fixed grid of per-block double partials, then one warp adds them in a fixed
//    order, so the global grad norm is deterministic. sum_squares_all queues that pair for each of many
//    buffers, each writing its own result slot, and copies the slots to the host at once: one host wait for
//    the whole gradient norm instead of one per buffer.
//  - y += x (gradient accumulation).
// All three read and write 16 bytes (4 fp32) per access where the buffers are 16-byte aligned (AdamW's bf16
// output: 8 bytes, 4 bf16, per access).
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
// one segment offset into 256-byte aligned shards) and, with an output, out + head 8-byte aligned (4 bf16
// per access), then the last few one by one. Every element gets the same arithmetic on either path. out
// (n bf16, or null) receives the updated parameters rounded to bf16.
__global__ void adamw_kernel(float* param, const float* grad, float* m, float* v, bf16* out, size_t n, AdamWScalars s,
                             bool vec, size_t head) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t tid = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  size_t done = 0;
  if (vec) {
    if (tid < head) {
      adamw_one(param[tid], grad[tid], m[tid], v[tid], s);
      if (out) out[tid] = to_bf16(param[tid]);
    }
    const size_t n4 = (n - head) / 4;
    float4* p4 = reinterpret_cast<float4*>(param + head);
    float4* m4 = reinterpret_cast<float4*>(m + head);
    float4* v4 = reinterpret_cast<float4*>(v + head);
    const float4* g4 = reinterpret_cast<const float4*>(grad + head);
    uint2* o4 = out ? reinterpret_cast<uint2*>(out + head) : nullptr;  // 4 bf16 per access
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
      if (o4) {
        uint2 u;
        __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&u);
        h[0] = __floats2bfloat162_rn(p.x, p.y);
        h[1] = __floats2bfloat162_rn(p.z, p.w);
        o4[i] = u;
      }
    }
    done = head + n4 * 4;
  }
  for (size_t i = done + tid; i < n; i += stride) {
    adamw_one(param[i], grad[i], m[i], v[i], s);
    if (out) out[i] = to_bf16(param[i]);
  }
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

// One warp: result = sum of the `blocks` partials.
__global__ void sum_squares_final_kernel(double* result, const double* partials, int blocks) {
  double acc = 0.0;
  for (int i = threadIdx.x; i < blocks; i += kWarp) acc += partials[i];
  acc = warp_sum(acc);
  if (threadIdx.x == 0) *result = acc;
}

// y += x / divisor, one IEEE division per element (x / 1 is x: a plain add).
__global__ void accumulate_kernel(float* y, const float* x, size_t n, float divisor, bool vec) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t tid = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  size_t done = 0;
  if (vec) {
    const size_t n4 = n / 4;
    for (size_t i = tid; i < n4; i += stride) {
      float4 a = reinterpret_cast<float4*>(y)[i];
      const float4 b = reinterpret_cast<const float4*>(x)[i];
      a.x += __fdiv_rn(b.x, divisor), a.y += __fdiv_rn(b.y, divisor);
      a.z += __fdiv_rn(b.z, divisor), a.w += __fdiv_rn(b.w, divisor);
      reinterpret_cast<float4*>(y)[i] = a;
    }
    done = n4 * 4;
  }
  for (size_t i = done + tid; i < n; i += stride) y[i] += __fdiv_rn(x[i], divisor);
}

// The partials kernel's blocks for n elements: one per 4 * kSumThreads of them (a vector each per thread), at
// most kSumBlocks. A small tensor (a layernorm's weight, a bias) launches a block or two, not kSumBlocks of
// threads with nothing to add. It depends on n only, so each sum still repeats bit for bit.
int sum_squares_blocks(size_t n) {
  return static_cast<int>(std::clamp<size_t>(ceil_div(n, 4 * static_cast<size_t>(kSumThreads)), 1, kSumBlocks));
}

}  // namespace

void adamw_update(float* param, const float* grad, float* m, float* v, bf16* param_out, size_t n,
                  const AdamWParams& hp, cudaStream_t stream) {
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
  bool vec = mis % sizeof(float) == 0 && (reinterpret_cast<uintptr_t>(grad) & 15u) == mis &&
             (reinterpret_cast<uintptr_t>(m) & 15u) == mis && (reinterpret_cast<uintptr_t>(v) & 15u) == mis;
  const size_t head = vec ? std::min(n, ((16 - mis) & 15u) / sizeof(float)) : 0;
  // The bf16 output's vectors start at the same element, so they must be 8-byte aligned there.
  if (param_out && (reinterpret_cast<uintptr_t>(param_out + head) & 7u) != 0) vec = false;
  GPT_LAUNCH(adamw_kernel, grid_for(vec ? ceil_div(n, 4) : n, 256), 256, 0, stream, param, grad, m, v, param_out, n, s,
             vec, vec ? head : 0);
}

// Each buffer's partials go to the one partials block (the next buffer's partials kernel starts after this
// buffer's final kernel has read them: one stream), its total to its own result slot. A chunk of up to
// kSumSquaresSlots results is copied to the host at once; the host adds them in index order, from 0, as the
// loop of sum_squares does. The pageable copy returns once it is done: the host's one wait per chunk.
double sum_squares_all(const float* const* xs, const size_t* ns, int count, void* scratch, cudaStream_t stream) {
  double* partials = static_cast<double*>(scratch);  // (kSumBlocks)
  double* results = partials + kSumBlocks;           // (kSumSquaresSlots)
  double host[kSumSquaresSlots];
  double total = 0.0;
  for (int first = 0; first < count; first += kSumSquaresSlots) {
    const int chunk = std::min(count - first, kSumSquaresSlots);
    for (int i = 0; i < chunk; i++) {
      const float* x = xs[first + i];
      const size_t n = ns[first + i];
      // n == 0: the partial is zero and the result is 0.0, as sum_squares returns without a launch.
      const int blocks = sum_squares_blocks(n);
      GPT_LAUNCH(sum_squares_partials_kernel, blocks, kSumThreads, 0, stream, partials, x, n, n > 0 && aligned16(x));
      GPT_LAUNCH(sum_squares_final_kernel, 1, kWarp, 0, stream, results + i, partials, blocks);
    }
    CUDA_CHECK(cudaMemcpyAsync(host, results, chunk * sizeof(double), cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    for (int i = 0; i < chunk; i++) total += host[i];
  }
  return total;
}

double sum_squares(const float* x, size_t n, void* scratch, cudaStream_t stream) {
  if (n == 0) return 0.0;
  return sum_squares_all(&x, &n, 1, scratch, stream);
}

void accumulate_f32(float* y, const float* x, size_t n, float divisor, cudaStream_t stream) {
  if (n == 0) return;
  const bool vec = aligned16(y) && aligned16(x);
  GPT_LAUNCH(accumulate_kernel, grid_for(vec ? ceil_div(n, 4) : n, 256), 256, 0, stream, y, x, n, divisor, vec);
}

}  // namespace gpt::cuda
