// The CUDA backend's plumbing: the clear error without a GPU (runs on GPU-less machines), and with a GPU its
// identity, ledger-tagged allocations (cross-checked against the driver's own count), copies, zeroing and the
// fp32 <-> bf16 conversions.
#ifdef GPT_WITH_CUDA
#include <cuda_runtime.h>
#endif

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "src/core/check.h"
#include "tests/cuda/twin_util.h"

namespace gpt::test {
namespace {

TEST(CudaBackend, RefusesClearlyWithoutGpu) {
  if (gpt::cuda_available()) GTEST_SKIP() << "a CUDA GPU is visible: the no-GPU error cannot happen here";
  try {
    auto be = make_backend("cuda");
    FAIL() << "make_backend(\"cuda\") returned a backend although no GPU is visible";
  } catch (const gpt::Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("--device cuda"), std::string::npos) << msg;
    EXPECT_NE(msg.find("CUDA"), std::string::npos) << msg;
  }
}

TEST(CudaBackend, IdentityAndLedger) {
  if (!gpt::cuda_available()) GTEST_SKIP() << "no CUDA GPU visible";
  auto be = make_backend("cuda");
  EXPECT_EQ(be->name(), "cuda");
  EXPECT_EQ(be->compute_dtype(), DType::BF16);
  EXPECT_EQ(be->compute_size(), 2u);
  const int64_t act0 = be->ledger().current(MemDomain::device, MemCat::activation);
  const int64_t host0 = be->ledger().current(MemDomain::host, MemCat::host_offload);
  void* d = be->alloc(3 << 20, MemCat::activation);
  void* h = be->alloc_host(1 << 20, MemCat::host_offload);
  EXPECT_EQ(be->ledger().current(MemDomain::device, MemCat::activation) - act0, 3 << 20);
  EXPECT_EQ(be->ledger().current(MemDomain::host, MemCat::host_offload) - host0, 1 << 20);
  // The pinned host block is ordinary memory for the CPU.
  static_cast<char*>(h)[0] = 1, static_cast<char*>(h)[(1 << 20) - 1] = 2;
  be->free(d);
  be->free_host(h);
  EXPECT_EQ(be->ledger().current(MemDomain::device, MemCat::activation), act0);
  EXPECT_EQ(be->ledger().current(MemDomain::host, MemCat::host_offload), host0);
  EXPECT_GT(be->ledger().current(MemDomain::device, MemCat::workspace), 0) << "cuBLASLt workspace is tagged";
}

// What the backend says about its GPU: the kind, a dense bf16 peak named from the device (989.4 TFLOP/s on
// an H100/H200 SXM), and the driver-memory figures of the start-up report.
TEST(CudaBackend, ReportsItsDevice) {
  if (!gpt::cuda_available()) GTEST_SKIP() << "no CUDA GPU visible";
  auto be = make_backend(DeviceKind::cuda, 0);
  EXPECT_EQ(be->kind(), DeviceKind::cuda);
  const PeakFlops p = be->device_info().peak_flops();
  EXPECT_GT(p.flops, 1e12) << p.source;
  EXPECT_FALSE(p.source.empty());
  const std::optional<DriverMemory> m = be->device_info().driver_memory();
  ASSERT_TRUE(m);
  EXPECT_EQ(m->ledger_bytes, be->ledger().current_total(MemDomain::device));
  EXPECT_GT(m->workspace_bytes, 0);
  EXPECT_GE(m->driver_bytes, m->ledger_bytes) << "the driver sees every block the ledger does";
  EXPECT_EQ(m->driver_query, "cudaMemGetInfo");
}

#ifdef GPT_WITH_CUDA
// The ledger says what the backend asked for; the driver's free-memory count must drop by that much (plus at
// most a little page rounding and allocator bookkeeping, 64 MiB here) and come back after the free.
TEST(CudaBackend, LedgerMatchesDriver) {
  if (!gpt::cuda_available()) GTEST_SKIP() << "no CUDA GPU visible";
  auto be = make_backend("cuda");
  const size_t bytes = size_t{1} << 30, slack = size_t{64} << 20;
  size_t free0 = 0, free1 = 0, free2 = 0, total = 0;
  be->synchronize();
  ASSERT_EQ(cudaMemGetInfo(&free0, &total), cudaSuccess);
  const int64_t ledger0 = be->ledger().current_total(MemDomain::device);
  void* p = be->alloc(bytes, MemCat::activation);
  ASSERT_EQ(cudaMemGetInfo(&free1, &total), cudaSuccess);
  EXPECT_EQ(be->ledger().current_total(MemDomain::device) - ledger0, static_cast<int64_t>(bytes));
  EXPECT_GE(free0 - free1, bytes) << "driver saw less than the ledger";
  EXPECT_LE(free0 - free1, bytes + slack) << "driver saw much more than the ledger";
  be->free(p);
  ASSERT_EQ(cudaMemGetInfo(&free2, &total), cudaSuccess);
  EXPECT_GE(free2 + slack, free0) << "memory did not come back after free";
}
#endif

TEST(CudaBackend, CopiesZeroAndPinnedRoundTrip) {
  if (!gpt::cuda_available()) GTEST_SKIP() << "no CUDA GPU visible";
  auto be = make_backend("cuda");
  Rng rng(501);
  const size_t n = 100003;
  auto x = uniform_f32(rng, n, -5, 5);
  DevBuf a = upload_f32(*be, x), b(*be, n * 4);
  be->copy_d2d(b.get(), a.get(), n * 4);
  EXPECT_EQ(download_f32(*be, b.get(), n), x);
  be->zero(b.get(), n * 4);
  EXPECT_EQ(download_f32(*be, b.get(), n), std::vector<float>(n, 0.0f));
  float* pinned = static_cast<float*>(be->alloc_host(n * 4, MemCat::host_offload));
  be->copy_d2h(pinned, a.get(), n * 4);
  be->synchronize();
  EXPECT_EQ(std::vector<float>(pinned, pinned + n), x);
  be->free_host(pinned);
}

// f32_to_compute rounds to nearest bf16 (ties to even); compute_to_f32 is exact. Cases: halfway points both
// ways, just above and below halfway, signed zero, and large and tiny normal numbers.
TEST(CudaBackend, Bf16ConversionRoundsToNearestEven) {
  if (!gpt::cuda_available()) GTEST_SKIP() << "no CUDA GPU visible";
  auto be = make_backend("cuda");
  const float ulp1 = std::ldexp(1.0f, -7);  // bf16 spacing in [1, 2)
  std::vector<float> x = {1.0f + ulp1 / 2,
                          1.0f + 1.5f * ulp1,
                          1.0f + ulp1 / 2 + std::ldexp(1.0f, -20),
                          1.0f + ulp1 / 2 - std::ldexp(1.0f, -20),
                          -0.0f,
                          3.0e38f,
                          -1.0e-37f,
                          0.1f};
  Rng rng(502);
  for (float v : uniform_f32(rng, 10000, -100, 100)) x.push_back(v);
  std::vector<float> want(x.size());
  for (size_t i = 0; i < x.size(); i++) want[i] = round_bf16(x[i]);
  EXPECT_EQ(want[0], 1.0f);             // tie, rounds to even (down)
  EXPECT_EQ(want[1], 1.0f + 2 * ulp1);  // tie, rounds to even (up)
  DevBuf c = upload_compute(*be, x);
  const std::vector<float> got = download_compute(*be, c.get(), x.size());
  for (size_t i = 0; i < x.size(); i++) ASSERT_EQ(got[i], want[i]) << "element " << i << " (" << x[i] << ")";
  EXPECT_TRUE(std::signbit(got[4])) << "-0 keeps its sign";
}

}  // namespace
}  // namespace gpt::test
