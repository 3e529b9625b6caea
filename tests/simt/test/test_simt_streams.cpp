// The SIMT emulator's streams (tests/simt/streams.h), each rule shown on small kernels and copies: queued
// work runs when something needs it, events order two streams, a missing wait shows, the legacy default stream
// waits for blocking streams only, copies keep CUDA's pageable-memory rules, and a queued kernel's fault names
// its launch site at the call that meets it. Each test pins each phase in turn (simt::pin_phase) and states
// what that phase must show: phase 0 runs every stream lazily, phase k the k-th stream the test created
// eagerly.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/cuda/common.cuh"
#include "src/backend/cuda/stream_clock.h"
#include "tests/simt/streams.h"
#include "tests/simt/test/simt_test.h"

namespace gpt::cuda {
namespace {

constexpr size_t kN = 256;

// Phase k for the scope (then back to the drawn phases).
struct PinPhase {
  explicit PinPhase(int k) { simt::pin_phase(k); }
  ~PinPhase() { simt::pin_phase(-1); }
};

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

// A pinned result is there after cudaStreamSynchronize; before it, the host sees it only when the stream ran
// ahead (phase 1), never when it is lazy (phase 0).
TEST(SimtStreams, QueuedWorkRunsByTheSynchronisation) {
  Stream s;
  DeviceFloats d(kN);
  PinnedFloats h;
  for (int phase = 0; phase <= 1; phase++) {
    PinPhase pin(phase);
    const float v = static_cast<float>(phase + 1);
    for (size_t i = 0; i < kN; i++) h.p[i] = -1.0f;
    fill(d.p, v, s.s);
    CUDA_CHECK(cudaMemcpyAsync(h.p, d.p, kN * sizeof(float), cudaMemcpyDeviceToHost, s.s));
    EXPECT_EQ(h.all(v), phase == 1) << "phase " << phase << ", before the synchronisation";
    CUDA_CHECK(cudaStreamSynchronize(s.s));
    EXPECT_TRUE(h.all(v)) << "phase " << phase;
  }
}

// Stream b (created second) copies what stream a (first) writes; returns the phases whose copy was stale.
std::vector<int> phases_with_stale_copies(bool wait) {
  Stream a, b;
  DeviceFloats x(kN), y(kN);
  PinnedFloats h;
  cudaEvent_t written;
  CUDA_CHECK(cudaEventCreateWithFlags(&written, cudaEventDisableTiming));
  std::vector<int> stale;
  for (int phase = 0; phase <= 2; phase++) {
    PinPhase pin(phase);
    const float v = static_cast<float>(phase + 1);
    fill(x.p, v, a.s);
    CUDA_CHECK(cudaEventRecord(written, a.s));
    if (wait) CUDA_CHECK(cudaStreamWaitEvent(b.s, written, 0));
    CUDA_CHECK(cudaMemcpyAsync(y.p, x.p, kN * sizeof(float), cudaMemcpyDeviceToDevice, b.s));
    CUDA_CHECK(cudaMemcpyAsync(h.p, y.p, kN * sizeof(float), cudaMemcpyDeviceToHost, b.s));
    CUDA_CHECK(cudaStreamSynchronize(b.s));
    if (!h.all(v)) stale.push_back(phase);
    CUDA_CHECK(cudaStreamSynchronize(a.s));
  }
  CUDA_CHECK(cudaEventDestroy(written));
  return stale;
}

TEST(SimtStreams, EventsOrderTwoStreams) { EXPECT_EQ(phases_with_stale_copies(true), std::vector<int>{}); }

// Without the wait, b copies before a writes when a is lazy: everything lazy (b's synchronisation runs b
// only) and b eager; with a eager the write happens to come first.
TEST(SimtStreams, MissingEventWaitShows) { EXPECT_EQ(phases_with_stale_copies(false), (std::vector<int>{0, 2})); }

// cudaMemcpy runs on the legacy default stream: after the blocking stream's work, not the non-blocking one's,
// which is done only when it ran ahead (phase 2).
TEST(SimtStreams, LegacyStreamWaitsForBlockingStreamsOnly) {
  Stream blocking, nonblocking(cudaStreamNonBlocking);
  DeviceFloats x(kN), z(kN);
  for (int phase = 0; phase <= 2; phase++) {
    PinPhase pin(phase);
    const std::vector<float> v(kN, static_cast<float>(phase + 1));
    fill(x.p, v[0], blocking.s);
    fill(z.p, v[0], nonblocking.s);
    EXPECT_EQ(x.host(), v) << "phase " << phase;
    EXPECT_EQ(z.host() == v, phase == 2) << "phase " << phase;
    CUDA_CHECK(cudaStreamSynchronize(nonblocking.s));
    EXPECT_EQ(z.host(), v) << "phase " << phase;
  }
}

// From pageable memory the source is read at the call (the host may reuse it at once); to pageable memory the
// call returns with the copy done.
TEST(SimtStreams, PageableCopiesKeepCudasHostRules) {
  Stream s;
  DeviceFloats d(kN);
  for (int phase = 0; phase <= 1; phase++) {
    PinPhase pin(phase);
    std::vector<float> src(kN, static_cast<float>(phase + 1)), dst(kN, -1.0f);  // (kN) each
    CUDA_CHECK(cudaMemcpyAsync(d.p, src.data(), kN * sizeof(float), cudaMemcpyHostToDevice, s.s));
    src.assign(kN, 0.0f);
    CUDA_CHECK(cudaMemcpyAsync(dst.data(), d.p, kN * sizeof(float), cudaMemcpyDeviceToHost, s.s));
    EXPECT_EQ(dst, std::vector<float>(kN, static_cast<float>(phase + 1))) << "phase " << phase;
  }
}

__global__ void divergent_barrier_kernel() {
  if (threadIdx.x < 16) {
    __syncthreads();
  } else {
    __syncwarp();
  }
}

// A fault while the queued kernel runs is met by the launch when its stream runs ahead (phase 1), else by the
// next synchronisation; either way the text names the kernel's launch site, the fault stays until
// cudaGetLastError takes it, and later work runs normally.
TEST(SimtStreams, QueuedKernelFaultsNameTheirLaunchSite) {
  Stream s;
  DeviceFloats out(kN);
  for (int phase = 0; phase <= 1; phase++) {
    PinPhase pin(phase);
    int line = 0;
    const std::string text = error_of([&] {
      line = __LINE__ + 1;
      GPT_LAUNCH(divergent_barrier_kernel, 1, 32, 0, s.s);
      CUDA_CHECK(cudaStreamSynchronize(s.s));
    });
    EXPECT_NE(text.find("the kernel launched at " + std::string(__FILE__) + ":" + std::to_string(line)),
              std::string::npos)
        << text;
    EXPECT_EQ(text.find("in cudaStreamSynchronize") != std::string::npos, phase == 0) << text;
    if (phase == 0) {
      EXPECT_EQ(cudaStreamSynchronize(s.s), cudaErrorLaunchFailure) << "the fault stays";
    }
    (void)cudaGetLastError();
    EXPECT_EQ(cudaStreamSynchronize(s.s), cudaSuccess) << "taken";
    fill(out.p, static_cast<float>(phase + 1), s.s);
    CUDA_CHECK(cudaStreamSynchronize(s.s));
    EXPECT_EQ(out.host(), std::vector<float>(kN, static_cast<float>(phase + 1)));
  }
}

// An error of a call that runs nothing on the device (a bad argument) is that call's alone: a later
// synchronisation does not return it.
TEST(SimtStreams, OnlyDeviceFaultsReachSynchronisations) {
  Stream s;
  int value = 0;
  EXPECT_EQ(cudaDeviceGetAttribute(&value, cudaDevAttrComputeCapabilityMajor, 99), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaStreamSynchronize(s.s), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidDevice) << "cudaGetLastError still reports it";
}

TEST(SimtStreams, StreamsAndEventsMustBeLive) {
  cudaStream_t s;
  cudaEvent_t e;
  CUDA_CHECK(cudaStreamCreate(&s));
  CUDA_CHECK(cudaEventCreate(&e));
  CUDA_CHECK(cudaStreamDestroy(s));
  CUDA_CHECK(cudaEventDestroy(e));
  cudaStream_t next;  // a new stream never takes a destroyed one's handle
  CUDA_CHECK(cudaStreamCreate(&next));
  EXPECT_NE(next, s);
  CUDA_CHECK(cudaStreamDestroy(next));
  DeviceFloats d(kN);
  EXPECT_EQ(cudaMemsetAsync(d.p, 0, kN * sizeof(float), s), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaEventRecord(e, nullptr), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaStreamDestroy(s), cudaErrorInvalidResourceHandle);
  (void)cudaGetLastError();
}

}  // namespace
}  // namespace gpt::cuda

namespace gpt::cuda {
namespace {

// Device time follows stream order, whatever order the emulator ran the streams in: under each phase, a kernel
// on stream b that waits for stream a's two kernels starts after them, so b's three kernels end 4 kernel times
// after a's start (its first ran beside a's). An event made without timing
// has no time, and an event whose stream has not run past it is not ready.
TEST(SimtStreams, EventTimesFollowStreamOrder) {
  for (int phase = 0; phase <= 2; phase++) {
    PinPhase pin(phase);
    Stream a, b;
    DeviceFloats d(kN), e(kN);
    cudaEvent_t start, a_done, b_done, untimed;
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&a_done));
    CUDA_CHECK(cudaEventCreate(&b_done));
    CUDA_CHECK(cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventRecord(start, a.s));
    fill(d.p, 1.0f, a.s);
    fill(d.p, 2.0f, a.s);
    CUDA_CHECK(cudaEventRecord(a_done, a.s));
    fill(e.p, 3.0f, b.s);  // b's first kernel runs beside a's
    CUDA_CHECK(cudaStreamWaitEvent(b.s, a_done, 0));
    fill(e.p, 4.0f, b.s);
    fill(e.p, 5.0f, b.s);
    CUDA_CHECK(cudaEventRecord(b_done, b.s));
    CUDA_CHECK(cudaEventRecord(untimed, b.s));
    float ms = 0;
    CUDA_CHECK(cudaEventSynchronize(b_done));
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, a_done));
    EXPECT_FLOAT_EQ(ms, 2 * simt::kKernelUs / 1000) << "phase " << phase;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, b_done));
    EXPECT_FLOAT_EQ(ms, 4 * simt::kKernelUs / 1000) << "phase " << phase;
    EXPECT_EQ(cudaEventElapsedTime(&ms, start, untimed), cudaErrorInvalidResourceHandle);
    (void)cudaGetLastError();
    for (cudaEvent_t ev : {start, a_done, b_done, untimed}) cudaEventDestroy(ev);
  }
}

// Work that completes later (a collective waiting for its peer) holds its stream: a query says not ready and
// returns, the work behind it waits, and once its poll says done the stream goes on, the work lasting its cost.
TEST(SimtStreams, QueriesReturnWhileWorkIsInProgress) {
  for (int phase = 0; phase <= 1; phase++) {
    PinPhase pin(phase);
    Stream s;
    DeviceFloats d(kN);
    bool peer_came = false;
    int polls = 0;
    cudaEvent_t start, done;
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&done));
    CUDA_CHECK(cudaEventRecord(start, s.s));
    ASSERT_EQ(simt::enqueue_async(s.s, [&]() -> simt::Poll { return [&] { return polls++, peer_came; }; }, 7.0),
              cudaSuccess);
    fill(d.p, 1.0f, s.s);
    CUDA_CHECK(cudaEventRecord(done, s.s));
    EXPECT_EQ(cudaEventQuery(done), cudaErrorNotReady) << "phase " << phase;
    EXPECT_EQ(cudaEventQuery(done), cudaErrorNotReady) << "phase " << phase;
    EXPECT_GE(polls, 2) << "phase " << phase;
    // "not ready" stays as the last error until taken, as the CUDA runtime may leave it (cuda::event_done takes it)
    EXPECT_EQ(cudaGetLastError(), cudaErrorNotReady) << "phase " << phase;
    EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "phase " << phase;
    peer_came = true;
    EXPECT_EQ(cudaEventQuery(done), cudaSuccess) << "phase " << phase;
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, done));
    EXPECT_FLOAT_EQ(ms, (7.0 + simt::kKernelUs) / 1000) << "phase " << phase;
    cudaEventDestroy(start);
    cudaEventDestroy(done);
  }
}

// The trace's device clock keeps spans exact however far a mark is from the anchor: cudaEventElapsedTime's
// float milliseconds an hour after it step by 0.25 ms, so measured from the anchor these 7 and 3 us spans
// would read 0 or 250 us.
TEST(SimtStreams, TheDeviceClocksSpansStayExactAnHourOn) {
  Stream s;
  EventClock clock(s.s);
  ASSERT_EQ(simt::enqueue(s.s, [] {}, 3.6e9), cudaSuccess);  // an hour of device time
  std::vector<uint64_t> marks;
  for (double cost_us : {7.0, 3.0, 2.5e6, 7.0}) {  // the third span, 2.5 s, also moves the base on
    marks.push_back(clock.mark());
    ASSERT_EQ(simt::enqueue(s.s, [] {}, cost_us), cudaSuccess);
  }
  marks.push_back(clock.mark());
  CUDA_CHECK(cudaStreamSynchronize(s.s));
  std::vector<double> t;
  for (uint64_t m : marks) t.push_back(clock.take_time_us(m));
  EXPECT_NEAR(t[1] - t[0], 7.0, 0.01);
  EXPECT_NEAR(t[2] - t[1], 3.0, 0.01);
  EXPECT_NEAR(t[3] - t[2], 2.5e6, 0.01);
  EXPECT_NEAR(t[4] - t[3], 7.0, 0.01);
  // events are reused once read: marking again needs no new one beyond the base
  const uint64_t again = clock.mark();
  EXPECT_LE(again, marks.size());
  CUDA_CHECK(cudaStreamSynchronize(s.s));
  EXPECT_NEAR(clock.take_time_us(again) - t[4], 0.0, 0.01);
}

}  // namespace
}  // namespace gpt::cuda
