// The runtime floor (src/runtime) on one process: --device resolution, the backend and the engine's
// communicator it makes (the world itself on CPU), --attention applied or refused with the flag's
// one-line error, and the MFU peak (--peak-tflops over the backend's own).
#include <gtest/gtest.h>

#include <string>

#include "src/core/check.h"
#include "src/dist/comm_world.h"
#include "src/runtime/runtime.h"
#include "tests/common/error_of.h"

namespace gpt::test {
namespace {

TEST(Runtime, ResolvesTheDeviceFlag) {
  EXPECT_EQ(resolve_device("cpu"), DeviceKind::cpu);
  EXPECT_EQ(resolve_device("cuda"), DeviceKind::cuda);
  EXPECT_EQ(resolve_device("auto"), cuda_available() ? DeviceKind::cuda : DeviceKind::cpu);
  const std::string e = error_of([] { resolve_device("tpu"); });
  EXPECT_NE(e.find("--device"), std::string::npos) << e;
}

TEST(Runtime, CpuRanksUseTheWorldCommunicator) {
  auto world = make_single_communicator();
  Runtime rt = make_runtime(*world, "cpu", "simple");
  ASSERT_TRUE(rt.backend);
  EXPECT_EQ(rt.backend->kind(), DeviceKind::cpu);
  EXPECT_FALSE(rt.backend->fused_attention());
  EXPECT_EQ(rt.engine_comm, world.get());
  EXPECT_FALSE(rt.device_comm);
  EXPECT_FALSE(rt.comm_buffers_on_device());
}

TEST(Runtime, RefusesAnAttentionPathTheBackendLacks) {
  auto world = make_single_communicator();
  std::string e = error_of([&] { make_runtime(*world, "cpu", "fused"); });
  EXPECT_NE(e.find("--attention fused"), std::string::npos) << e;
  e = error_of([&] { make_runtime(*world, "cpu", "flash"); });
  EXPECT_NE(e.find("--attention"), std::string::npos) << e;
}

TEST(Runtime, MfuPeakPrefersTheFlag) {
  auto world = make_single_communicator();
  Runtime rt = make_runtime(*world, "cpu", "simple");
  const PeakFlops flag = mfu_peak(*rt.backend, 2.5);
  EXPECT_EQ(flag.flops, 2.5e12);
  EXPECT_EQ(flag.source, "--peak-tflops");
  const PeakFlops own = mfu_peak(*rt.backend, 0);
  EXPECT_GT(own.flops, 0);
  EXPECT_EQ(own.source, "this CPU's measured fp32 sgemm");
}

}  // namespace
}  // namespace gpt::test
