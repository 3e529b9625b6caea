// The copy stream behind offload: a host->device copy, a compute op that reads its result, and a
// device->host copy of the op's output must happen in that order when the only ordering is the tickets'
// events (no stream synchronisation between them). The cpu backend's version copies at once.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "src/backend/backend.h"
#include "src/core/check.h"

namespace gpt::test {
namespace {

// Several rounds, each with new values (stale data from an earlier round must not pass): on a GPU the
// streams race differently each time; under the SIMT emulator (tests/simt/streams.h) each round ends with a
// host synchronisation, so each runs in a newly drawn phase (which stream, if any, runs ahead). Every pinned
// phase is run on the same copies by SimtCli.OffloadTrainsTheSameModelUnderEveryStreamSchedule.
void round_trip_through_compute(Backend& be) {
  const size_t n = size_t{1} << 20;  // 4 MiB: long enough that an unordered copy would read stale data
  float* host_in = static_cast<float*>(be.alloc_host(n * 4, MemCat::host_offload));   // (n) pinned
  float* host_out = static_cast<float*>(be.alloc_host(n * 4, MemCat::host_offload));  // (n) pinned
  float* a = static_cast<float*>(be.alloc(n * 4, MemCat::activation));                // (n)
  float* b = static_cast<float*>(be.alloc(n * 4, MemCat::activation));                // (n)
  for (int round = 0; round < 4; round++) {
    for (size_t i = 0; i < n; i++) host_in[i] = static_cast<float>(i % 1000 + 1000 * round) - 500.0f;
    for (size_t i = 0; i < n; i++) host_out[i] = -1.0f;
    be.zero(b, n * 4);
    const uint64_t up = be.copy_h2d_async(a, host_in, n * 4);
    be.wait_copy_device(up);
    be.accumulate_f32(b, a, n, 1);                                // b = 0 + a: reads the uploaded values
    be.accumulate_f32(b, a, n, 1);                                // b = 2a
    const uint64_t down = be.copy_d2h_async(host_out, b, n * 4);  // after the two ops, by its event
    be.wait_copy_host(down);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += host_out[i] != 2.0f * host_in[i];
    EXPECT_EQ(bad, 0u) << be.name() << ", round " << round << ": elements that escaped the ordering";
  }
  be.free(a), be.free(b), be.free_host(host_in), be.free_host(host_out);
}

TEST(CopyStream, CpuBackendCopiesAtOnce) {
  auto be = make_backend("cpu");
  round_trip_through_compute(*be);
}

TEST(CudaCopyStream, TicketsOrderCopiesAndCompute) {
  if (!gpt::cuda_available()) GTEST_SKIP() << "no CUDA GPU visible";
  auto be = make_backend("cuda");
  round_trip_through_compute(*be);
}

// A ticket whose ring slot was reused by a later copy of its direction is waited for through the newest copy
// of that direction: the data of the old copy is there afterwards, and a ticket never issued is refused. The
// download reads what an upload wrote only after compute waited for the upload (the two directions run on
// two streams, not ordered with each other).
TEST(CudaCopyStream, OldTicketsWaitForTheNewestCopy) {
  if (!gpt::cuda_available()) GTEST_SKIP() << "no CUDA GPU visible";
  auto be = make_backend("cuda");
  const size_t n = size_t{1} << 20;
  float* host = static_cast<float*>(be->alloc_host(n * 4, MemCat::host_offload));  // (n) pinned
  float* back = static_cast<float*>(be->alloc_host(n * 4, MemCat::host_offload));  // (n) pinned
  float* sink = static_cast<float*>(be->alloc_host(4, MemCat::host_offload));      // (1) pinned
  float* dev = static_cast<float*>(be->alloc(n * 4, MemCat::activation));          // (n)
  for (size_t i = 0; i < n; i++) host[i] = static_cast<float>(i), back[i] = -1.0f;
  const uint64_t first = be->copy_d2h_async(back, dev, 0);  // a ticket to age
  be->wait_copy_device(be->copy_h2d_async(dev, host, n * 4));
  const uint64_t down = be->copy_d2h_async(back, dev, n * 4);
  for (int i = 0; i < 300; i++) be->copy_d2h_async(sink, dev, 4);  // 300 > the ring's 256 events
  EXPECT_NO_THROW(be->wait_copy_host(first));
  EXPECT_NO_THROW(be->wait_copy_host(down));  // also aged out: waits for the newest, which follows it
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) bad += back[i] != host[i];
  EXPECT_EQ(bad, 0u);
  try {
    be->wait_copy_host(uint64_t{1} << 40);
    ADD_FAILURE() << "a ticket never issued was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("never issued"), std::string::npos) << e.what();
  }
  be->synchronize();
  be->free(dev), be->free_host(host), be->free_host(back), be->free_host(sink);
}

}  // namespace
}  // namespace gpt::test
