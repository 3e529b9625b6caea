// The copy stream behind offload: a host->device copy, a compute op that reads its result, and a
// device->host copy of the op's output must happen in that order when the only ordering is the tickets'
// events (no stream synchronisation between them). The cpu backend's version copies at once.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/check.h"

namespace gpt::test {
namespace {

void round_trip_through_compute(Backend& be) {
  const size_t n = size_t{1} << 22;  // 16 MiB: long enough that an unordered copy would read stale data
  float* host_in = static_cast<float*>(be.alloc_host(n * 4, MemCat::host_offload));    // (n) pinned
  float* host_out = static_cast<float*>(be.alloc_host(n * 4, MemCat::host_offload));   // (n) pinned
  float* a = static_cast<float*>(be.alloc(n * 4, MemCat::activation));                 // (n)
  float* b = static_cast<float*>(be.alloc(n * 4, MemCat::activation));                 // (n)
  for (size_t i = 0; i < n; i++) host_in[i] = static_cast<float>(i % 1000) - 500.0f, host_out[i] = -1.0f;
  be.zero(b, n * 4);
  const uint64_t up = be.copy_h2d_async(a, host_in, n * 4);
  be.wait_copy_device(up);
  be.accumulate_f32(b, a, n);  // b = 0 + a: reads the uploaded values
  be.accumulate_f32(b, a, n);  // b = 2a
  const uint64_t down = be.copy_d2h_async(host_out, b, n * 4);  // after the two ops, by its event
  be.wait_copy_host(down);
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) bad += host_out[i] != 2.0f * host_in[i];
  EXPECT_EQ(bad, 0u) << be.name() << ": elements that escaped the ordering";
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

TEST(CudaCopyStream, RefusesTicketsWhoseEventWasReused) {
  if (!gpt::cuda_available()) GTEST_SKIP() << "no CUDA GPU visible";
  auto be = make_backend("cuda");
  float* host = static_cast<float*>(be->alloc_host(4, MemCat::host_offload));
  float* dev = static_cast<float*>(be->alloc(4, MemCat::activation));
  const uint64_t first = be->copy_h2d_async(dev, host, 4);
  be->wait_copy_host(first);  // fresh: fine
  for (int i = 0; i < 256; i++) be->copy_h2d_async(dev, host, 4);
  try {
    be->wait_copy_host(first);
    ADD_FAILURE() << "a ticket 256 copies old was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("older than"), std::string::npos) << e.what();
  }
  be->synchronize();
  be->free(dev), be->free_host(host);
}

}  // namespace
}  // namespace gpt::test
