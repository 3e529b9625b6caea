// The simulated step's memory ledger (src/sim/sim_step.h) against the closed form (memory_from_geometry,
// src/plan/memplan.h), byte for byte in every domain and category, over the flags that change what is
// allocated (the wrap and activation offload among them); tests/fsdp/test_memplan_measured.cpp holds the plan equal to real runs' ledgers. And the
// simulated machine backs nothing: GPT-3 175B at 512 ranks plans without the process growing by more than
// a few MiB.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <string>

#include "src/core/check.h"
#include "src/plan/memplan.h"
#include "src/sim/sim_step.h"
#include "tests/common/tiny_config.h"

namespace gpt::test {
namespace {

void expect_equal(const MemPlanInput& in, const std::string& what) {
  sim::SimRun run;
  run.run = in;
  const sim::SimResult s = sim::simulate_step(run);
  const MemPlan g = memory_from_geometry(in);
  for (int d = 0; d < kMemDomains; d++)
    for (int c = 0; c < kMemCats; c++)
      EXPECT_EQ(s.peak[d][c], g.peak[d][c]) << what << " " << memdomain_name((MemDomain)d) << "/" << memcat_name((MemCat)c);
  EXPECT_EQ(s.device_peak, g.device_peak) << what;
  EXPECT_EQ(s.host_peak, g.host_peak) << what;
}

TEST(SimMemory, LedgerEqualsTheClosedFormForEveryLever) {
  for (DType compute : {DType::F32, DType::BF16})
    for (ShardStrategy st : {ShardStrategy::full, ShardStrategy::grad_op, ShardStrategy::none, ShardStrategy::hybrid})
      for (int N : {1, 2, 3, 4, 6}) {
        if (st == ShardStrategy::hybrid && (N % 2 != 0 || N == 2)) continue;
        for (const char* rc : {"none", "full", "selective", "every:2"})
          for (OffloadMode off : {OffloadMode::none, OffloadMode::optimizer, OffloadMode::params})
            for (int K : {1, 2, 3}) {
              MemPlanInput in;
              in.cfg = tiny_config(4, 2, 64, 32, 101);
              in.world = N;
              in.fsdp.strategy = st;
              in.fsdp.shard_group = st == ShardStrategy::hybrid ? 2 : 0;
              in.fsdp.offload = off;
              in.fsdp.gather_slots = K;
              in.fsdp.no_sync = K == 3;
              in.fsdp.reduce_dtype = K == 2 ? DType::BF16 : DType::F32;
              in.recompute = RecomputePolicy::parse(rc);
              in.B = 2;
              in.T = 16;
              in.compute = compute;
              // the wrap and activation offload rotate with K: every pairing of them with the rest
              in.wrap = WrapPolicy::parse(K == 1 ? "block" : K == 2 ? "blocks:3" : "min-params:1");
              in.offload_activations = K != 2;
              expect_equal(in, str(dtype_name(compute), " ", FsdpOptions::name(st), " N=", N, " recompute ", rc,
                                   " offload ", FsdpOptions::name(off), in.offload_activations ? ",activations" : "",
                                   " K=", K, " wrap ", in.wrap.str()));
            }
      }
}

TEST(SimMemory, CudaAttentionPathsAndTheirWorkspace) {
  for (AttentionPath a : {AttentionPath::simple, AttentionPath::fused, AttentionPath::cudnn}) {
    MemPlanInput in;
    in.cfg = tiny_config(2, 2, 128, 64, 300);
    in.world = 2;
    in.B = 3;
    in.T = 64;
    in.compute = DType::BF16;
    in.attention = a;
    if (a == AttentionPath::cudnn) in.cudnn_workspace = cuda::CudnnPlanWorkspace{1 << 20, 1 << 16};
    expect_equal(in, attention_path_name(a));
  }
}

int64_t max_rss_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return (int64_t)u.ru_maxrss * 1024;
}

TEST(SimMemory, GPT3At512RanksBacksNoMemory) {
  MemPlanInput in;
  in.cfg = tiny_config(96, 96, 12288, 2048, 50257);  // GPT-3 175B
  in.world = 512;
  in.B = 1;
  in.T = 2048;
  in.compute = DType::BF16;
  in.attention = AttentionPath::cudnn;  // head size 128
  in.cudnn_workspace = cuda::CudnnPlanWorkspace{};
  in.recompute = RecomputePolicy::parse("full");
  const int64_t before = max_rss_bytes();
  sim::SimRun run;
  run.run = in;
  const sim::SimResult s = sim::simulate_step(run);
  const int64_t grown = max_rss_bytes() - before;
  EXPECT_GT(s.device_peak, int64_t{5} << 30);  // several GiB planned per rank
  EXPECT_LT(grown, int64_t{64} << 20) << "the process grew by " << grown << " bytes";
  expect_equal(in, "GPT-3 175B at 512 ranks");
}

}  // namespace
}  // namespace gpt::test
