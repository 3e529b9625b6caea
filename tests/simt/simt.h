// The device side of the SIMT emulator: what a kernel sees when the project's CUDA sources are compiled as
// plain C++ for the CPU (gptlib_simt, built beside gptlib wherever CUDA is found; option GPT_SIMT).
// Force-included ahead of every CUDA source of that build. Why: no GPU is at hand where the project is built
// and tested, so without this the CUDA kernels would never run before a GPU run; under it they run
// unchanged, one fiber per CUDA thread (executor.cpp), against the same twin tests as on a GPU
// (test_cuda_simt: the tests/cuda suite linked against gptlib_simt).
//
// What is emulated: thread/block indices, __syncthreads and __syncwarp as real barriers over the block's or
// warp's live threads (a barrier that cannot complete, e.g. a __syncthreads inside a branch some threads
// skipped, fails the launch instead of hanging), warp shuffles with their convergence, static and dynamic
// shared memory (dynamic memory starts as NaN bytes and is fenced: a write past its end fails the launch),
// launch limits (threads per block, grid size, 48 KiB of dynamic shared memory without the opt-in), WMMA on
// 16x16x16 bf16 tiles (wmma.h) and the fp32 intrinsics with explicit rounding. The schedule (executor.cpp)
// runs each warp as far as it can before the next: a missing __syncthreads between warps that write and read
// shared memory then reads stale or NaN data, every time.
// Streams and events (streams.h) queue the work: it runs when something needs it, or early in the phase
// that makes its stream eager. What is not emulated: timing, the memory model beyond those schedules (a
// race another interleaving would expose can pass), the tensor cores' accumulation order, and cuDNN (the
// emulator build has none; NCCL runs over MPI, nccl.cpp).
#pragma once
#define __shared__ static thread_local
#define __launch_bounds__(...)

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <functional>
#include <type_traits>

namespace simt {

// Where the running CUDA thread is.
struct ThreadPlace {
  uint3 thread, block;
  dim3 block_dim, grid_dim;
};
const ThreadPlace& here();

// Queues the grid on `stream` (streams.h), to run body once per thread of every block (blocks one after
// another, each block's threads as fibers). A bad configuration fails the launch at once; a fault while it
// runs (a barrier that cannot complete, a fenced write) stops the grid and becomes the device's error, as a
// GPU's kernel fault does: returned by the next synchronising call or cudaGetLastError, its text (naming the
// launch site file:line) in cudaGetErrorString.
void launch(const void* kernel, dim3 grid, dim3 block, size_t smem, cudaStream_t stream, const char* file, int line,
            std::function<void()> body);
void* dynamic_shared();
void syncthreads();
void syncwarp(unsigned mask);
// Warp exchange: this lane offers `bytes` of `in`; once every lane named by mask has offered, `out` receives
// lane `src`'s offer (src is a lane of this warp).
void warp_exchange(unsigned mask, const void* in, void* out, size_t bytes, int src);
// Fails the running launch with `what` (from kernel code: a WMMA misuse).
[[noreturn]] void fault(const char* what);

}  // namespace simt

#define threadIdx (::simt::here().thread)
#define blockIdx (::simt::here().block)
#define blockDim (::simt::here().block_dim)
#define gridDim (::simt::here().grid_dim)

// cuda_runtime.h's C++ overload for a kernel (it exists for nvcc only).
template <typename... P>
cudaError_t cudaFuncSetAttribute(void (*kernel)(P...), cudaFuncAttribute attr, int value) {
  return cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel), attr, value);
}

namespace simt {
// The running thread's lane: its linear index in the block (x fastest) modulo the warp size.
inline int lane() {
  const ThreadPlace& p = here();
  return static_cast<int>(p.thread.x + p.block_dim.x * (p.thread.y + p.block_dim.y * p.thread.z)) % 32;
}
}  // namespace simt

inline void __syncthreads() { simt::syncthreads(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) { simt::syncwarp(mask); }

template <typename T>
T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
  const int lane = simt::lane();
  T out;
  simt::warp_exchange(mask, &v, &out, sizeof(T), (lane & ~(width - 1)) + (src & (width - 1)));
  return out;
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  const int lane = simt::lane();
  const int src = lane ^ lane_mask;
  T out;
  simt::warp_exchange(mask, &v, &out, sizeof(T), (src & ~(width - 1)) == (lane & ~(width - 1)) ? src : lane);
  return out;
}

// fp32 with an explicit rounding: the host's SSE arithmetic rounds each operation to nearest even, as these
// do (the build turns off contraction into fused multiply-adds).
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __frcp_rn(float a) { return 1.0f / a; }
inline float __fsqrt_rn(float a) { return std::sqrt(a); }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline float __expf(float a) { return std::exp(a); }
inline float rsqrtf(float a) { return 1.0f / std::sqrt(a); }
inline void __stwb(uint4* p, uint4 v) { *p = v; }

// CUDA's integer min/max take mixed operands in their common type.
template <typename A, typename B, typename = std::enable_if_t<std::is_integral_v<A> && std::is_integral_v<B>>>
std::common_type_t<A, B> min(A a, B b) {
  using C = std::common_type_t<A, B>;
  return static_cast<C>(b) < static_cast<C>(a) ? static_cast<C>(b) : static_cast<C>(a);
}
template <typename A, typename B, typename = std::enable_if_t<std::is_integral_v<A> && std::is_integral_v<B>>>
std::common_type_t<A, B> max(A a, B b) {
  using C = std::common_type_t<A, B>;
  return static_cast<C>(a) < static_cast<C>(b) ? static_cast<C>(b) : static_cast<C>(a);
}

#include "tests/simt/wmma.h"
