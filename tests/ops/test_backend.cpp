// The backend factory and the CPU backend's memory: names, kinds, dtype, unknown devices rejected, ledger
// bookkeeping per category and domain, alignment, and the plain copies.
#include <cstring>

#include "tests/ops/op_test_util.h"

namespace gpt::test {
namespace {

TEST(Backend, FactoryMakesCpuAndRejectsUnknownDevices) {
  auto be = make_backend("cpu");
  ASSERT_TRUE(be);
  EXPECT_EQ(be->name(), "cpu");
  EXPECT_EQ(be->compute_dtype(), DType::F32);
  EXPECT_EQ(be->compute_size(), 4u);
  EXPECT_THROW(make_backend("tpu"), gpt::Error);
  EXPECT_THROW(make_backend(""), gpt::Error);
}

TEST(Backend, KindsByNameAndByLocalRank) {
  auto be = make_backend(DeviceKind::cpu, 3);  // the local rank picks a GPU; the cpu backend has one device
  ASSERT_TRUE(be);
  EXPECT_EQ(be->kind(), DeviceKind::cpu);
  EXPECT_EQ(make_backend("cpu")->kind(), DeviceKind::cpu);
  EXPECT_STREQ(device_kind_name(DeviceKind::cpu), "cpu");
  EXPECT_STREQ(device_kind_name(DeviceKind::cuda), "cuda");
  EXPECT_EQ(parse_device_kind("cpu"), DeviceKind::cpu);
  EXPECT_EQ(parse_device_kind("cuda"), DeviceKind::cuda);
  EXPECT_THROW(parse_device_kind("auto"), gpt::Error);  // "auto" is resolved above the backend
  EXPECT_THROW(make_backend(DeviceKind::cpu, -1), gpt::Error);
}

TEST(Backend, LedgerCountsByCategoryAndDomain) {
  auto be = cpu_backend();
  MemoryLedger& led = be->ledger();
  void* a = be->alloc(1000, MemCat::activation);
  void* b = be->alloc(24, MemCat::param_shard);
  void* h = be->alloc_host(512, MemCat::optim_state);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b) % 64, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(h) % 64, 0u);
  EXPECT_EQ(led.current(MemDomain::device, MemCat::activation), 1000);
  EXPECT_EQ(led.current(MemDomain::device, MemCat::param_shard), 24);
  EXPECT_EQ(led.current(MemDomain::device, MemCat::optim_state), 0);
  EXPECT_EQ(led.current(MemDomain::host, MemCat::optim_state), 512);
  EXPECT_EQ(led.current_total(MemDomain::device), 1024);
  EXPECT_EQ(led.current_total(MemDomain::host), 512);

  be->free(a);
  EXPECT_EQ(led.current(MemDomain::device, MemCat::activation), 0);
  EXPECT_EQ(led.peak(MemDomain::device, MemCat::activation), 1000);
  EXPECT_EQ(led.peak_total(MemDomain::device), 1024);
  be->free(b);
  be->free_host(h);
  EXPECT_EQ(led.current_total(MemDomain::device), 0);
  EXPECT_EQ(led.current_total(MemDomain::host), 0);
  EXPECT_EQ(be->alloc(0, MemCat::workspace), nullptr);  // zero bytes: nothing allocated or counted
  EXPECT_THROW(be->free(&led), gpt::Error);              // a pointer the ledger never saw
}

TEST(Backend, CopiesAndConversionsAreExact) {
  auto be = cpu_backend();
  auto src = randn(33, 1);
  float* d = static_cast<float*>(be->alloc(33 * 4, MemCat::workspace));
  float* e = static_cast<float*>(be->alloc(33 * 4, MemCat::workspace));
  std::vector<float> back(33);
  be->copy_h2d(d, src.data(), 33 * 4);
  be->copy_d2d(e, d, 33 * 4);
  be->copy_d2h(back.data(), e, 33 * 4);
  EXPECT_EQ(back, src);
  be->f32_to_compute(d, src.data(), 33);
  be->compute_to_f32(back.data(), d, 33);
  EXPECT_EQ(back, src);
  be->zero(d, 33 * 4);
  be->synchronize();
  for (int i = 0; i < 33; i++) EXPECT_EQ(d[i], 0.0f);
  be->free(d);
  be->free(e);
}

}  // namespace
}  // namespace gpt::test
