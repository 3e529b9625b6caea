// Shared pieces of the CUDA kernels: the cuBLAS leg of the error path (every cuBLAS status becomes a
// gpt::Error naming the call, the file and the line; CUDA_CHECK itself is src/core/cuda_check.h), bf16 <->
// fp32 helpers, warp reductions and launch sizing.
// Rule of the backend: activations are bf16 in memory, every arithmetic step is fp32, and everything that
// accumulates across calls (parameter gradients, optimizer state, statistics) stays fp32.
#pragma once
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "src/core/check.h"
#include "src/core/cuda_check.h"

namespace gpt::cuda {

using bf16 = __nv_bfloat16;

[[noreturn]] inline void fail_cublas(cublasStatus_t s, const char* expr, const char* file, int line) {
  ::gpt::fail(file, ":", line, ": cuBLAS error ", cublasLtGetStatusName(s), " (", cublasLtGetStatusString(s),
              ") in ", expr);
}

}  // namespace gpt::cuda

#define CUBLAS_CHECK(call)                                                 \
  do {                                                                     \
    cublasStatus_t gpt_cublas_st_ = (call);                                \
    if (gpt_cublas_st_ != CUBLAS_STATUS_SUCCESS)                           \
      ::gpt::cuda::fail_cublas(gpt_cublas_st_, #call, __FILE__, __LINE__); \
  } while (0)

namespace gpt::cuda {

constexpr int kWarp = 32;

// ---- bf16 <-> fp32 ---------------------------------------------------------------------------
__device__ __forceinline__ float to_f32(bf16 x) { return __bfloat162float(x); }
__device__ __forceinline__ bf16 to_bf16(float x) { return __float2bfloat16_rn(x); }  // nearest-even

// ---- warp reductions (all 32 lanes must take part; every lane gets the result) ----------------
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = kWarp / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = kWarp / 2; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ double warp_sum(double v) {
  for (int o = kWarp / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// ---- launch sizing -----------------------------------------------------------------------------
inline size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

// Blocks for a grid-stride loop over n elements: enough to fill the GPU, never more than needed.
inline unsigned grid_for(size_t n, int threads) {
  const size_t max_blocks = 65536;  // grid-stride loops cover the rest
  size_t blocks = ceil_div(n, static_cast<size_t>(threads));
  if (blocks < 1) blocks = 1;
  return static_cast<unsigned>(blocks < max_blocks ? blocks : max_blocks);
}

// Rounds a byte count up to 256 so sub-buffers carved from one scratch block stay aligned for cuBLASLt
// and vector loads.
inline size_t align_up(size_t bytes) { return (bytes + 255) & ~static_cast<size_t>(255); }

}  // namespace gpt::cuda
