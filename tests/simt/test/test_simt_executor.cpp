// The SIMT emulator's own rules, each shown on a small kernel written here: barriers order shared memory,
// shuffles exchange what a GPU exchanges, and what would hang or misbehave on a GPU (a barrier some threads
// never reach, a shuffle naming a returned lane, a write past dynamic shared memory, a launch beyond the
// limits, a copy outside an allocation) fails the launch with a message instead of passing silently.
// Compiled like the CUDA sources of the emulator build (simt.h force-included).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/cuda/common.cuh"
#include "tests/simt/test/simt_test.h"

namespace gpt::cuda {
namespace {

__global__ void block_sum_kernel(float* out) {
  __shared__ float s[32];
  const float v = static_cast<float>(threadIdx.x + 1);
  out[threadIdx.x] = block_sum(v, s);
}

TEST(SimtExecutor, BarriersOrderSharedMemory) {
  DeviceFloats out(256);
  GPT_LAUNCH(block_sum_kernel, 1, 256, 0, nullptr, out.p);
  for (float v : out.host()) EXPECT_EQ(v, 256.0f * 257.0f / 2.0f);  // every thread gets 1 + ... + 256
}

// Without the barrier, thread 0 reads slots other threads have not written yet: on a GPU that is a race
// whose outcome depends on scheduling; here the threads run in order up to a barrier, so it shows every time.
__global__ void missing_barrier_kernel(float* out, float value) {
  __shared__ float s[256];
  s[threadIdx.x] = value;
  if (threadIdx.x == 0) {
    float t = 0.0f;
    for (int i = 0; i < 256; i++) t += s[i];
    out[0] = t;
  }
}

TEST(SimtExecutor, MissingBarrierShows) {
  DeviceFloats out(1);
  int wrong = 0;
  for (int k = 1; k <= 4; k++) {  // four consecutive launches: every schedule order once
    GPT_LAUNCH(missing_barrier_kernel, 1, 256, 0, nullptr, out.p, static_cast<float>(k));
    wrong += out.host()[0] != 256.0f * static_cast<float>(k);
  }
  EXPECT_GE(wrong, 1) << "in some order thread 0 must run ahead of the writers, as a GPU may";
}

__global__ void shuffle_kernel(float* out) {
  const float v = static_cast<float>(threadIdx.x);
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, v, 5) + 1000.0f * __shfl_sync(0xffffffffu, v, 3);
}

TEST(SimtExecutor, ShufflesExchangeLaneValues) {
  DeviceFloats out(64);
  GPT_LAUNCH(shuffle_kernel, 1, 64, 0, nullptr, out.p);
  const std::vector<float> h = out.host();
  for (int t = 0; t < 64; t++)
    EXPECT_EQ(h[t], static_cast<float>(t ^ 5) + 1000.0f * static_cast<float>((t / 32) * 32 + 3)) << t;
}

__global__ void divergent_barrier_kernel() {
  if (threadIdx.x < 16) {
    __syncthreads();
  } else {
    __syncwarp();
  }
}
__global__ void shuffle_with_returned_lanes_kernel(float* out) {
  if (threadIdx.x >= 16) return;
  out[threadIdx.x] = warp_sum(1.0f);
}

TEST(SimtExecutor, BarriersThatCannotCompleteFailTheLaunch) {
  const std::string divergent = error_of([] { GPT_LAUNCH(divergent_barrier_kernel, 1, 32, 0, nullptr); });
  EXPECT_NE(divergent.find("waits at __syncthreads while its warp waits at a warp barrier"), std::string::npos)
      << divergent;
  DeviceFloats out(32);
  const std::string returned =
      error_of([&] { GPT_LAUNCH(shuffle_with_returned_lanes_kernel, 1, 32, 0, nullptr, out.p); });
  EXPECT_NE(returned.find("which has returned"), std::string::npos) << returned;
  // The emulator recovers: the next launch runs normally.
  GPT_LAUNCH(block_sum_kernel, 1, 32, 0, nullptr, out.p);
  EXPECT_EQ(out.host()[31], 32.0f * 33.0f / 2.0f);
}

__global__ void dynamic_shared_kernel(float* out, int n_written) {
  GPT_DYNAMIC_SHARED(float, smem);
  if (threadIdx.x == 0) {
    out[0] = smem[0];  // before any write
    for (int i = 0; i < n_written; i++) smem[i] = 1.0f;
  }
}

TEST(SimtExecutor, DynamicSharedMemoryStartsUndefinedAndIsFenced) {
  DeviceFloats out(1);
  GPT_LAUNCH(dynamic_shared_kernel, 1, 32, 64 * sizeof(float), nullptr, out.p, 64);
  EXPECT_TRUE(std::isnan(out.host()[0])) << "shared memory must be written before it is read";
  const std::string past =
      error_of([&] { GPT_LAUNCH(dynamic_shared_kernel, 1, 32, 64 * sizeof(float), nullptr, out.p, 65); });
  EXPECT_NE(past.find("wrote past the end of its dynamic shared memory"), std::string::npos) << past;
}

TEST(SimtExecutor, LaunchLimitsHold) {
  DeviceFloats out(1);
  const std::string threads = error_of([&] { GPT_LAUNCH(block_sum_kernel, 1, 1056, 0, nullptr, out.p); });
  EXPECT_NE(threads.find("at most 1024 threads"), std::string::npos) << threads;
  EXPECT_NE(threads.find("cudaErrorInvalidConfiguration"), std::string::npos) << threads;
  EXPECT_NE(threads.find("test_simt_executor.cpp:"), std::string::npos) << "names the launch site: " << threads;
  const std::string grid = error_of([&] { GPT_LAUNCH(block_sum_kernel, 0, 32, 0, nullptr, out.p); });
  EXPECT_NE(grid.find("invalid grid"), std::string::npos) << grid;
  // Above 48 KiB of dynamic shared memory only after the kernel's opt-in.
  const size_t big = 64 << 10;
  const std::string optin = error_of([&] { GPT_LAUNCH(dynamic_shared_kernel, 1, 32, big, nullptr, out.p, 1); });
  EXPECT_NE(optin.find("cudaFuncSetAttribute"), std::string::npos) << optin;
  CUDA_CHECK(
      cudaFuncSetAttribute(dynamic_shared_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(big)));
  GPT_LAUNCH(dynamic_shared_kernel, 1, 32, big, nullptr, out.p, 1);
}

TEST(SimtRuntime, CopiesStayInsideAllocations) {
  DeviceFloats d(16);
  std::vector<float> h(17, 0.0f);
  EXPECT_EQ(cudaMemcpy(d.p, h.data(), 16 * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(d.p, h.data(), 17 * sizeof(float), cudaMemcpyHostToDevice), cudaErrorIllegalAddress);
  EXPECT_EQ(cudaMemcpy(h.data(), d.p + 1, 16 * sizeof(float), cudaMemcpyDeviceToHost), cudaErrorIllegalAddress);
  EXPECT_EQ(cudaMemsetAsync(d.p + 8, 0, 9 * sizeof(float), nullptr), cudaErrorIllegalAddress);
  EXPECT_EQ(cudaFree(h.data()), cudaErrorInvalidValue);
  (void)cudaGetLastError();
  // Fresh device memory reads as NaN until written (cudaMalloc promises no contents).
  EXPECT_TRUE(std::isnan(DeviceFloats(4).host()[2]));
}

}  // namespace
}  // namespace gpt::cuda
