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
  Runtime rt = make_runtime(*world, "cpu", "auto", 128, 2);
  ASSERT_TRUE(rt.backend);
  EXPECT_EQ(rt.backend->kind(), DeviceKind::cpu);
  EXPECT_EQ(rt.backend->attention_path(), AttentionPath::simple) << "auto on the cpu backend";
  EXPECT_EQ(rt.engine_comm, world.get());
  EXPECT_FALSE(rt.device_comm);
  EXPECT_FALSE(rt.comm_buffers_on_device());
}

TEST(Runtime, RefusesAnAttentionPathTheBackendLacks) {
  auto world = make_single_communicator();
  for (const char* path : {"fused", "cudnn"}) {
    const std::string e = error_of([&] { make_runtime(*world, "cpu", path, 128, 2); });
    EXPECT_NE(e.find(std::string("--attention ") + path + ": the cpu backend has only the simple path"),
              std::string::npos)
        << e;
  }
  const std::string e = error_of([&] { make_runtime(*world, "cpu", "flash", 128, 2); });
  EXPECT_NE(e.find("--attention: expected auto, simple, fused or cudnn"), std::string::npos) << e;
}

// --attention on a cuda device: auto takes what the GPU offers for the model's head size, an explicit path
// the head size rules out is refused at start-up with the flag's error.
TEST(Runtime, AttentionOnTheGpuFollowsTheRules) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU visible";
  auto world = make_single_communicator();
  Runtime rt = make_runtime(*world, "cuda", "auto", 768, 12);
  const AttentionPath want = resolve_attention_path("auto", rt.backend->attention_target(), 768, 12);
  EXPECT_EQ(rt.backend->attention_path(), want);
  EXPECT_NE(want, AttentionPath::simple) << "head size 64 has a flash-style path on every GPU";
  const std::string e = error_of([&] { make_runtime(*world, "cuda", "fused", 768, 8); });  // head size 96
  EXPECT_NE(e.find("--attention fused: supports head sizes 32 and 64"), std::string::npos) << e;
}

TEST(Runtime, MfuPeakPrefersTheFlag) {
  auto world = make_single_communicator();
  Runtime rt = make_runtime(*world, "cpu", "simple", 128, 2);
  const PeakFlops flag = mfu_peak(*rt.backend, 2.5);
  EXPECT_EQ(flag.flops, 2.5e12);
  EXPECT_EQ(flag.source, "--peak-tflops");
  const PeakFlops own = mfu_peak(*rt.backend, 0);
  EXPECT_GT(own.flops, 0);
  EXPECT_EQ(own.source, rt.backend->device_info().peak_flops().source);
  EXPECT_EQ(own.source.rfind("this CPU's measured fp32 sgemm", 0), 0u) << own.source;
}

}  // namespace
}  // namespace gpt::test
