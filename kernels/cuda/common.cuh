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
#include <map>
#include <utility>

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

// ---- block reductions (every thread of the block, blockDim.x a multiple of 32, must take part; every thread
// gets the result): warp shuffles, then the warps' values in warp order. s: one float per warp of shared
// memory, free again on return.
__device__ __forceinline__ float block_max(float v, float* s) {
  v = warp_max(v);
  if (threadIdx.x % kWarp == 0) s[threadIdx.x / kWarp] = v;
  __syncthreads();
  float m = -INFINITY;
  for (int w = 0; w < static_cast<int>(blockDim.x / kWarp); w++) m = fmaxf(m, s[w]);
  __syncthreads();  // s is reused by the next reduction
  return m;
}
__device__ __forceinline__ float block_sum(float v, float* s) {
  v = warp_sum(v);
  if (threadIdx.x % kWarp == 0) s[threadIdx.x / kWarp] = v;
  __syncthreads();
  float t = 0.0f;
  for (int w = 0; w < static_cast<int>(blockDim.x / kWarp); w++) t += s[w];
  __syncthreads();
  return t;
}

// ---- 16-byte vectors: 8 bf16 or 4 fp32 per access ---------------------------------------------------
// The memory-bound kernels move 16 bytes per thread and access (one LDG.128 / STG.128) where the buffers
// allow it: every pointer 16-byte aligned (aligned16) and, for row-wise kernels, a row length that keeps
// each row aligned (C % 8 == 0 for bf16). The callers check both on the host and otherwise run the same
// kernel's scalar path, which visits the same elements in the same order, so the two paths agree bit for
// bit. tests/cuda/check_vector_ptx.sh checks without a GPU that the PTX for sm_90 keeps them 128-bit (.v4,
// which PTX requires to be 16-byte aligned); what only a GPU run can show is the bandwidth they reach.
constexpr int kVec = 8;  // bf16 per 16-byte vector

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// x (8 floats) <- 8 bf16 at p (16-byte aligned).
__device__ __forceinline__ void load8(float (&x)[kVec], const bf16* p) {
  const uint4 u = *reinterpret_cast<const uint4*>(p);
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&u);
#pragma unroll
  for (int k = 0; k < kVec / 2; k++) {
    const float2 f = __bfloat1622float2(h[k]);
    x[2 * k] = f.x;
    x[2 * k + 1] = f.y;
  }
}
// 8 bf16 at p (16-byte aligned) <- x rounded to nearest even (as to_bf16, element by element).
__device__ __forceinline__ void store8(bf16* p, const float (&x)[kVec]) {
  uint4 u;
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&u);
#pragma unroll
  for (int k = 0; k < kVec / 2; k++) h[k] = __floats2bfloat162_rn(x[2 * k], x[2 * k + 1]);
  *reinterpret_cast<uint4*>(p) = u;
}
// 8 floats at p (16-byte aligned fp32, two float4 accesses) += x, element by element.
__device__ __forceinline__ void add8_f32(float* p, const float (&x)[kVec]) {
  float4* v = reinterpret_cast<float4*>(p);
  float4 a = v[0], b = v[1];
  a.x += x[0], a.y += x[1], a.z += x[2], a.w += x[3];
  b.x += x[4], b.y += x[5], b.z += x[6], b.w += x[7];
  v[0] = a;
  v[1] = b;
}
// Up to 8 elements p[0..n) one by one (the scalar path and row tails); the others are left as they are.
__device__ __forceinline__ void load8_partial(float (&x)[kVec], const bf16* p, int n) {
#pragma unroll
  for (int k = 0; k < kVec; k++)
    if (k < n) x[k] = to_f32(p[k]);
}
__device__ __forceinline__ void store8_partial(bf16* p, const float (&x)[kVec], int n) {
#pragma unroll
  for (int k = 0; k < kVec; k++)
    if (k < n) p[k] = to_bf16(x[k]);
}
// Row access for the row kernels: 8 elements at p when kVecPath (aligned, whole vector), else the n <= 8
// that lie inside the row, one by one.
template <bool kVecPath>
__device__ __forceinline__ void load_row8(float (&x)[kVec], const bf16* p, int n) {
  if constexpr (kVecPath) load8(x, p); else load8_partial(x, p, n);
}
template <bool kVecPath>
__device__ __forceinline__ void store_row8(bf16* p, const float (&x)[kVec], int n) {
  if constexpr (kVecPath) store8(p, x); else store8_partial(p, x, n);
}

// ---- launching ---------------------------------------------------------------------------------
// Every kernel launch is GPT_LAUNCH(kernel, grid, block, smem, stream, args...): the launch, then its check,
// which fails naming the launch site's file and line (a bad configuration fails where it was made). In the
// SIMT emulator build (GPT_SIMT, tests/simt/) the same call runs the grid on the CPU, one fiber per CUDA
// thread, so the kernels' code runs unchanged under the twin tests.
struct LaunchSite {
  const char* file;
  int line;
  template <typename... P, typename... A>
  void operator()(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, A... args) const {
#ifdef GPT_SIMT
    ::simt::launch(reinterpret_cast<const void*>(kernel), grid, block, smem, stream, file, line,
                   [=] { kernel(args...); });
#else
    kernel<<<grid, block, smem, stream>>>(args...);
#endif
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) ::gpt::detail::cuda_fail(e, "a kernel launch", file, line);
  }
};
#define GPT_LAUNCH ::gpt::cuda::LaunchSite{__FILE__, __LINE__}

// A kernel's dynamic shared memory (the launch's smem bytes), 128-byte aligned: `type* name`.
#ifdef GPT_SIMT
#define GPT_DYNAMIC_SHARED(type, name) type* name = static_cast<type*>(::simt::dynamic_shared())
#else
#define GPT_DYNAMIC_SHARED(type, name) extern __shared__ __align__(128) type name[]
#endif

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

// ---- dynamic shared memory above 48 KiB ---------------------------------------------------------------
// The most dynamic shared memory a block may opt into on the current device (cached per device).
inline int shared_memory_optin_limit() {
  static std::map<int, int> limit;  // device -> bytes
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  auto it = limit.find(dev);
  if (it == limit.end()) {
    int bytes = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    it = limit.emplace(dev, bytes).first;
  }
  return it->second;
}

// Lets `kernel` launch with `bytes` of dynamic shared memory on the current device. Above the default 48 KiB
// that takes cudaFuncSetAttribute, which sets the current device's limit only: so once per kernel, device and
// larger size. The caller checks `bytes` against shared_memory_optin_limit() first, with its own advice.
inline void allow_dynamic_shared(const void* kernel, size_t bytes) {
  if (bytes <= 48u * 1024) return;
  static std::map<std::pair<const void*, int>, size_t> allowed_of;  // (kernel, device) -> bytes allowed
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  size_t& allowed = allowed_of[{kernel, dev}];
  if (bytes <= allowed) return;
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  allowed = bytes;
}
template <typename... P>
void allow_dynamic_shared(void (*kernel)(P...), size_t bytes) {
  allow_dynamic_shared(reinterpret_cast<const void*>(kernel), bytes);
}

// ---- element-wise maps over bf16 buffers ------------------------------------------------------------
// out[i] = op(a[i], b[i]) for i < n, in fp32, rounded once to bf16 (b null: op gets 0). With `vec` (out, a, b
// 16-byte aligned), each thread moves 8 elements per access and the last n % 8 go one by one; otherwise
// every element goes one by one. Either way each element sees the same arithmetic. out may equal a or b
// (in place): every element is read before it is written, by the same thread.
template <typename Op>
__global__ void map_kernel(bf16* out, const bf16* a, const bf16* b, size_t n, Op op, bool vec) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t tid = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  size_t done = 0;
  if (vec) {
    const size_t nv = n / kVec;
    for (size_t v = tid; v < nv; v += stride) {
      float x[kVec], y[kVec] = {};
      load8(x, a + v * kVec);
      if (b) load8(y, b + v * kVec);
#pragma unroll
      for (int k = 0; k < kVec; k++) x[k] = op(x[k], y[k]);
      store8(out + v * kVec, x);
    }
    done = nv * kVec;
  }
  for (size_t i = done + tid; i < n; i += stride) out[i] = to_bf16(op(to_f32(a[i]), b ? to_f32(b[i]) : 0.0f));
}

template <typename Op>
void launch_map(bf16* out, const bf16* a, const bf16* b, size_t n, Op op, cudaStream_t stream) {
  if (n == 0) return;
  const bool vec = aligned16(out) && aligned16(a) && (!b || aligned16(b));
  const int threads = 256;
  GPT_LAUNCH(map_kernel<Op>, grid_for(vec ? ceil_div(n, kVec) : n, threads), threads, 0, stream, out, a, b, n, op,
                vec);
}

}  // namespace gpt::cuda
