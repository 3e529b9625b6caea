// The backend factory and the CPU backend's memory: names, kinds, dtype, unknown devices rejected, ledger
// bookkeeping per category and domain, alignment, and the plain copies. Also what backends report about
// their device: the peak FLOP/s rules (the GPU table is plain data, checked here without a GPU) and the
// wording of the driver-memory report.
#include <cblas.h>

#include <cstring>

#include "src/backend/peak_flops.h"
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
  EXPECT_THROW(parse_device_kind("auto"), gpt::Error);  // resolved above the backend (src/runtime)
  EXPECT_THROW(make_backend(DeviceKind::cpu, -1), gpt::Error);
  EXPECT_FALSE(be->device_info().driver_memory());  // no driver to ask
}

TEST(Backend, CpuPeakIsMeasuredOnceAndKept) {
  auto be = cpu_backend();
  const PeakFlops p = be->device_info().peak_flops();
  EXPECT_GT(p.flops, 0);
  // The source says what was measured and where: the CPU, OpenBLAS's kernels for it, and its threads.
  EXPECT_EQ(p.source.rfind("this CPU's measured fp32 sgemm (", 0), 0u) << p.source;
  EXPECT_NE(p.source.find(openblas_get_corename()), std::string::npos) << p.source;
  EXPECT_NE(p.source.find(str(openblas_get_num_threads(), " threads)")), std::string::npos) << p.source;
  EXPECT_EQ(be->device_info().peak_flops().flops, p.flops);
  EXPECT_EQ(be->device_info().peak_flops().source, p.source);
}

TEST(PeakFlops, DatasheetPartsBeforeTheFormula) {
  // H100 SXM / H200: the driver reports the 1.98 GHz boost clock, the datasheet peak is at 1.83 GHz
  EXPECT_EQ(gpu_bf16_peak_flops({"NVIDIA H200", 9, 0, 132, 1980000}).flops, 989.4e12);
  EXPECT_EQ(gpu_bf16_peak_flops({"NVIDIA H100 80GB HBM3", 9, 0, 132, 1980000}).flops, 989.4e12);
  EXPECT_EQ(gpu_bf16_peak_flops({"NVIDIA H100 PCIe", 9, 0, 114, 1755000}).flops, 756.5e12);
  EXPECT_EQ(gpu_bf16_peak_flops({"NVIDIA A100-SXM4-80GB", 8, 0, 108, 1410000}).flops, 312e12);
  const PeakFlops h200 = gpu_bf16_peak_flops({"NVIDIA H200", 9, 0, 132, 1980000});
  EXPECT_NE(h200.source.find("H100/H200 SXM"), std::string::npos) << h200.source;
  EXPECT_NE(h200.source.find("NVIDIA H200"), std::string::npos) << h200.source;
}

TEST(PeakFlops, FormulaForOtherParts) {
  const PeakFlops l40s = gpu_bf16_peak_flops({"NVIDIA L40S", 8, 9, 142, 2520000});
  EXPECT_DOUBLE_EQ(l40s.flops, 142 * 2.52e9 * 1024);
  EXPECT_NE(l40s.source.find("142 SMs x 2.52 GHz x 1024"), std::string::npos) << l40s.source;
  EXPECT_DOUBLE_EQ(gpu_bf16_peak_flops({"an sm_90 part", 9, 0, 100, 1500000}).flops, 100 * 1.5e9 * 4096);
  // sm_87 is not listed: the newest listed rate not newer than it (sm_86's), and the source says so
  const PeakFlops orin = gpu_bf16_peak_flops({"Orin", 8, 7, 16, 1300000});
  EXPECT_DOUBLE_EQ(orin.flops, 16 * 1.3e9 * 1024);
  EXPECT_NE(orin.source.find("--peak-tflops"), std::string::npos) << orin.source;
  EXPECT_THROW(gpu_bf16_peak_flops({"Tesla T4", 7, 5, 40, 1590000}), gpt::Error);  // no bf16 tensor cores
  EXPECT_THROW(gpu_bf16_peak_flops({"odd", 9, 0, 0, 0}), gpt::Error);
}

TEST(DriverMemory, OneLinePerRankAndAWarningBeyondTheExplained) {
  constexpr int64_t MiB = 1 << 20;
  DriverMemory m;
  m.driver_query = "cudaMemGetInfo";
  m.ledger_bytes = 100 * MiB;
  m.workspace_bytes = 10 * MiB;
  m.driver_bytes = 200 * MiB;
  m.explained_bytes = 66 * MiB;
  std::vector<std::string> lines = m.lines(2, false);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], "rank 2 device memory: ledger 100 MiB (workspace 10 MiB) | driver (cudaMemGetInfo, since "
                      "backend start) 200 MiB | difference 100 MiB");
  EXPECT_EQ(lines[1].rfind("warning: rank 2: the driver counts 100 MiB more than the ledger, beyond the 66 MiB", 0), 0u)
      << lines[1];
  lines = m.lines(2, true);  // NCCL's buffers are in the driver's figure: no warning
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("difference 100 MiB (includes NCCL's buffers)"), std::string::npos) << lines[0];
  m.driver_bytes = 150 * MiB;  // 50 MiB more: explained
  EXPECT_EQ(m.lines(0, false).size(), 1u);
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
