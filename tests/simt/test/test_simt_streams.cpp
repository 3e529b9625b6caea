// The SIMT emulator's streams (tests/simt/streams.h), each rule shown on small kernels and copies: queued
// work runs when something needs it, events order two streams, a missing wait shows, the legacy default stream
// waits for blocking streams only, copies keep CUDA's pageable-memory rules, and a queued kernel's fault names
// its launch site at the call that meets it. The phase changes at each host synchronisation and cycles with
// the number of live streams plus one, so each test runs rounds whose count of synchronisations is coprime
// with that cycle: every phase meets every round's critical point.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/cuda/common.cuh"
#include "tests/simt/test/simt_test.h"

namespace gpt::cuda {
namespace {

constexpr size_t kN = 256;
constexpr int kRounds = 6;

__global__ void fill_kernel(float* p, size_t n, float v) {
  const size_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = v;
}
void fill(float* p, float v, cudaStream_t s) { GPT_LAUNCH(fill_kernel, ceil_div(kN, 128), 128, 0, s, p, kN, v); }

struct Stream {
  cudaStream_t s = nullptr;
  explicit Stream(unsigned flags = cudaStreamDefault) { CUDA_CHECK(cudaStreamCreateWithFlags(&s, flags)); }
  ~Stream() { cudaStreamDestroy(s); }
};
struct PinnedFloats {
  float* p = nullptr;
  PinnedFloats() { CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&p), kN * sizeof(float))); }
  ~PinnedFloats() { cudaFreeHost(p); }
  bool all(float v) const {
    for (size_t i = 0; i < kN; i++)
      if (p[i] != v) return false;
    return true;
  }
};

// One stream, one synchronisation per round: a pinned result is there after cudaStreamSynchronize, and before
// it the host may see it or not (both happen, as on a GPU).
TEST(SimtStreams, QueuedWorkRunsByTheSynchronisation) {
  Stream s;
  DeviceFloats d(kN);
  PinnedFloats h;
  int early = 0, late = 0;
  for (int r = 1; r <= kRounds; r++) {
    for (size_t i = 0; i < kN; i++) h.p[i] = -1.0f;
    fill(d.p, static_cast<float>(r), s.s);
    CUDA_CHECK(cudaMemcpyAsync(h.p, d.p, kN * sizeof(float), cudaMemcpyDeviceToHost, s.s));
    (h.all(static_cast<float>(r)) ? early : late)++;
    CUDA_CHECK(cudaStreamSynchronize(s.s));
    EXPECT_TRUE(h.all(static_cast<float>(r))) << "round " << r;
  }
  EXPECT_GE(late, 1) << "some round must leave the copy for the synchronisation, as a GPU may";
  EXPECT_GE(early, 1) << "some round must run the stream ahead of the host";
}

// Stream b copies what stream a writes; two synchronisations per round (b, then a), two live streams.
int rounds_with_stale_copies(bool wait) {
  Stream a, b;
  DeviceFloats x(kN), y(kN);
  PinnedFloats h;
  cudaEvent_t written;
  CUDA_CHECK(cudaEventCreateWithFlags(&written, cudaEventDisableTiming));
  int stale = 0;
  for (int r = 1; r <= kRounds; r++) {
    fill(x.p, static_cast<float>(r), a.s);
    CUDA_CHECK(cudaEventRecord(written, a.s));
    if (wait) CUDA_CHECK(cudaStreamWaitEvent(b.s, written, 0));
    CUDA_CHECK(cudaMemcpyAsync(y.p, x.p, kN * sizeof(float), cudaMemcpyDeviceToDevice, b.s));
    CUDA_CHECK(cudaMemcpyAsync(h.p, y.p, kN * sizeof(float), cudaMemcpyDeviceToHost, b.s));
    CUDA_CHECK(cudaStreamSynchronize(b.s));
    stale += !h.all(static_cast<float>(r));
    CUDA_CHECK(cudaStreamSynchronize(a.s));
  }
  CUDA_CHECK(cudaEventDestroy(written));
  return stale;
}

TEST(SimtStreams, EventsOrderTwoStreams) { EXPECT_EQ(rounds_with_stale_copies(true), 0); }

TEST(SimtStreams, MissingEventWaitShows) {
  EXPECT_GE(rounds_with_stale_copies(false), 1) << "without the wait, b must copy before a writes in some round";
}

// cudaMemcpy runs on the legacy default stream: after the blocking stream's work, not the non-blocking one's.
// Two synchronisations per round (the two cudaMemcpy), two live streams.
TEST(SimtStreams, LegacyStreamWaitsForBlockingStreamsOnly) {
  Stream blocking, nonblocking(cudaStreamNonBlocking);
  DeviceFloats x(kN), z(kN);
  int stale = 0;
  for (int r = 1; r <= kRounds; r++) {
    fill(x.p, static_cast<float>(r), blocking.s);
    fill(z.p, static_cast<float>(r), nonblocking.s);
    EXPECT_EQ(x.host(), std::vector<float>(kN, static_cast<float>(r))) << "round " << r;
    stale += z.host() != std::vector<float>(kN, static_cast<float>(r));
  }
  EXPECT_GE(stale, 1) << "the non-blocking stream's work must not be waited for";
  CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_EQ(z.host(), std::vector<float>(kN, static_cast<float>(kRounds)));
}

// From pageable memory the source is read at the call (the host may reuse it at once); to pageable memory the
// call returns with the copy done.
TEST(SimtStreams, PageableCopiesKeepCudasHostRules) {
  Stream s;
  DeviceFloats d(kN);
  for (int r = 1; r <= kRounds; r++) {
    std::vector<float> src(kN, static_cast<float>(r)), dst(kN, -1.0f);
    CUDA_CHECK(cudaMemcpyAsync(d.p, src.data(), kN * sizeof(float), cudaMemcpyHostToDevice, s.s));
    src.assign(kN, 0.0f);
    CUDA_CHECK(cudaMemcpyAsync(dst.data(), d.p, kN * sizeof(float), cudaMemcpyDeviceToHost, s.s));
    EXPECT_EQ(dst, std::vector<float>(kN, static_cast<float>(r))) << "round " << r;
  }
}

__global__ void divergent_barrier_kernel() {
  if (threadIdx.x < 16) {
    __syncthreads();
  } else {
    __syncwarp();
  }
}

// A fault while the queued kernel runs is met by the launch (its stream ran at once) or by the next
// synchronisation; either way the text names the kernel's launch site, and later work runs normally. A round
// met at the launch has three synchronisations and one met at the synchronisation four, so with one stream
// (two phases) a round of the first kind is followed by one of the second: in three rounds there is one.
TEST(SimtStreams, QueuedKernelFaultsNameTheirLaunchSite) {
  Stream s;
  DeviceFloats out(kN);
  int at_sync = 0;
  for (int r = 1; r <= 3; r++) {
    int line = 0;
    const std::string text = launch_error([&] {
      line = __LINE__ + 1;
      GPT_LAUNCH(divergent_barrier_kernel, 1, 32, 0, s.s);
      CUDA_CHECK(cudaStreamSynchronize(s.s));
    });
    EXPECT_NE(text.find("the kernel launched at " + std::string(__FILE__) + ":" + std::to_string(line)),
              std::string::npos)
        << text;
    at_sync += text.find("in cudaStreamSynchronize") != std::string::npos;
    (void)cudaStreamSynchronize(s.s);  // a fault met at a synchronisation stays until it is taken
    (void)cudaGetLastError();
    fill(out.p, static_cast<float>(r), s.s);
    CUDA_CHECK(cudaStreamSynchronize(s.s));
    EXPECT_EQ(out.host(), std::vector<float>(kN, static_cast<float>(r)));
  }
  EXPECT_GE(at_sync, 1) << "some round must queue the kernel and meet its fault at the synchronisation";
}

TEST(SimtStreams, StreamsAndEventsMustBeLive) {
  cudaStream_t s;
  cudaEvent_t e;
  CUDA_CHECK(cudaStreamCreate(&s));
  CUDA_CHECK(cudaEventCreate(&e));
  CUDA_CHECK(cudaStreamDestroy(s));
  CUDA_CHECK(cudaEventDestroy(e));
  DeviceFloats d(kN);
  EXPECT_EQ(cudaMemsetAsync(d.p, 0, kN * sizeof(float), s), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaEventRecord(e, nullptr), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaStreamDestroy(s), cudaErrorInvalidResourceHandle);
  (void)cudaGetLastError();
}

}  // namespace
}  // namespace gpt::cuda
