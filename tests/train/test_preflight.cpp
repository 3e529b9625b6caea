// Pre-flight (plan/preflight.h) against closed forms: the need is the plan's peaks plus the stated margin,
// times the ranks sharing the node; a run that cannot fit is refused with the figures and a lever, and the
// lever is one the planner says fits. The host-memory readers against cgroup files written here.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "src/plan/preflight.h"
#include "src/util/host_memory.h"
#include "tests/common/error_of.h"
#include "tests/common/test_paths.h"

namespace gpt::test {
namespace {

MemPlanInput run_of(const std::string& preset, int B, int T, int world = 1, DType compute = DType::F32) {
  MemPlanInput in;
  in.cfg = preset_config(preset);
  in.cfg.finalize();
  in.B = B;
  in.T = T;
  in.world = world;
  in.compute = compute;
  return in;
}

constexpr int64_t GiB = int64_t{1} << 30;

TEST(Preflight, NeedIsThePlanPlusTheMarginForEveryRankOfTheNode) {
  PreflightSpec s;
  s.run = run_of("d6", 4, 64, 2);
  s.ranks_per_node = 2;
  MemoryAvailable cpu;
  cpu.host = 100 * GiB;
  const MemPlan p = plan_memory(s.run);
  const int64_t per_rank = p.device_peak + p.host_peak;
  const PreflightNeed n = preflight_need(s, cpu);
  EXPECT_EQ(n.host, 2 * (per_rank + (int64_t)(per_rank * 0.05) + (int64_t{256} << 20)));
  EXPECT_EQ(n.device, 0);
  EXPECT_TRUE(n.fits);
  cpu.host = n.host - 1;
  EXPECT_FALSE(preflight_need(s, cpu).fits);
  cpu.host = n.host;
  EXPECT_TRUE(preflight_need(s, cpu).fits);
}

TEST(Preflight, D48OnTwentyFourGibIsRefusedWithALeverThatFits) {
  PreflightSpec s;
  s.run = run_of("d48", 1, 64);
  MemoryAvailable cpu;
  cpu.host = 24 * GiB;
  cpu.host_source = "MemAvailable in /proc/meminfo";
  const std::string msg = error_of([&] { preflight_check(s, cpu, "bench"); });
  EXPECT_NE(msg.find("bench: this run does not fit in memory"), std::string::npos) << msg;
  EXPECT_NE(msg.find("24.00 GiB available (MemAvailable"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--no-preflight"), std::string::npos) << msg;
  const Lever l = cheapest_lever(s, cpu);
  ASSERT_FALSE(l.flags.empty());
  EXPECT_TRUE(l.need.fits);
  EXPECT_LE(l.need.host, cpu.host);
  EXPECT_NE(msg.find("cheapest lever that fits: " + l.flags), std::string::npos) << msg;
  // One process holds all the model states (16 bytes x 1.56e9 params = 23 GiB), so only more ranks help.
  EXPECT_NE(l.flags.find("--shard full at"), std::string::npos) << l.flags;
}

TEST(Preflight, CudaChecksTheDeviceAndOffersOffload) {
  PreflightSpec s;
  s.run = run_of("d12", 16, 1024, 1, DType::BF16);
  MemoryAvailable gpu;
  gpu.host = 200 * GiB;
  const MemPlan p = plan_memory(s.run);
  gpu.device = p.device_peak;  // the plan fits only without the margin
  EXPECT_FALSE(preflight_need(s, gpu).fits);
  const Lever l = cheapest_lever(s, gpu);
  EXPECT_EQ(l.flags, "--recompute selective");
  // A model whose states dominate (d24 at B=1, T=64) on a GPU with room for exactly the plan with the
  // optimizer offloaded: recompute does not help enough, offload optimizer is the cheapest lever.
  PreflightSpec big;
  big.run = run_of("d24", 1, 64, 1, DType::BF16);
  PreflightSpec offloaded = big;
  offloaded.run.fsdp.offload = OffloadMode::optimizer;
  gpu.device = preflight_need(offloaded, gpu).device;
  PreflightSpec selective = big;
  selective.run.recompute = RecomputePolicy::parse("selective");
  ASSERT_FALSE(preflight_need(selective, gpu).fits);
  EXPECT_EQ(cheapest_lever(big, gpu).flags, "--offload optimizer");
}

// When no single lever fits, the levers go together, each flag once (the strongest of --recompute selective
// and full), so that the suggestion is a command line gpt accepts.
TEST(Preflight, CombinedLeversNameEachFlagOnce) {
  PreflightSpec s;
  s.run = run_of("d12", 8, 1024, 2);
  s.run.fsdp.strategy = ShardStrategy::none;
  s.ranks_per_node = 2;
  PreflightSpec both = s;
  both.run.fsdp.strategy = ShardStrategy::full;
  both.run.recompute = RecomputePolicy::parse("full");
  MemoryAvailable cpu;
  cpu.host = preflight_need(both, cpu).host;  // exactly what the two levers together need
  for (const char* mode : {"selective", "full"}) {
    PreflightSpec one = s;
    one.run.recompute = RecomputePolicy::parse(mode);
    ASSERT_FALSE(preflight_need(one, cpu).fits) << mode;
  }
  PreflightSpec sharded = s;
  sharded.run.fsdp.strategy = ShardStrategy::full;
  ASSERT_FALSE(preflight_need(sharded, cpu).fits);
  const Lever l = cheapest_lever(s, cpu);
  EXPECT_EQ(l.flags, "--shard full --recompute full");
  EXPECT_TRUE(l.need.fits);
}

TEST(Preflight, CpuNeverOffersOffload) {
  PreflightSpec s;
  s.run = run_of("d12", 8, 1024);
  MemoryAvailable cpu;
  cpu.host = plan_memory(s.run).device_peak / 3;
  const Lever l = cheapest_lever(s, cpu);
  EXPECT_EQ(l.flags.find("--offload"), std::string::npos) << l.flags;
  EXPECT_TRUE(l.need.fits);
}

void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

TEST(HostMemory, CgroupHeadroomIsLimitMinusUsageLessReclaimableCache) {
  const std::string v1 = scratch_dir();
  write(v1 + "/memory.limit_in_bytes", "1073741824\n");
  write(v1 + "/memory.usage_in_bytes", "300000000\n");
  write(v1 + "/memory.stat", "cache 5\ntotal_inactive_file 100000000\n");
  EXPECT_EQ(cgroup_v1_headroom(v1), 1073741824 - (300000000 - 100000000));
  write(v1 + "/memory.limit_in_bytes", "9223372036854771712\n");  // v1's "no limit"
  EXPECT_EQ(cgroup_v1_headroom(v1), INT64_MAX);
  const std::string v2 = v1 + "/v2";
  std::filesystem::create_directories(v2);
  write(v2 + "/memory.max", "max\n");
  write(v2 + "/memory.current", "5\n");
  EXPECT_EQ(cgroup_v2_headroom(v2), INT64_MAX);
  write(v2 + "/memory.max", "2000\n");
  write(v2 + "/memory.current", "1500\n");
  write(v2 + "/memory.stat", "anon 1\ninactive_file 700\n");
  EXPECT_EQ(cgroup_v2_headroom(v2), 2000 - (1500 - 700));
  EXPECT_EQ(cgroup_v2_headroom(v2 + "/absent"), INT64_MAX);
}

TEST(HostMemory, AvailableIsPositiveAndNamed) {
  const HostMemory h = host_memory_available();
  EXPECT_GT(h.available, 0);
  EXPECT_FALSE(h.source.empty());
}

}  // namespace
}  // namespace gpt::test
