// Parity: N ranks train exactly what one process trains. For every strategy (full, grad_op, none,
// hybrid), with and without --no-sync gradient accumulation, on d2- and d4-shaped models, 20 steps of
// the same global batches give losses and final parameters equal to the single-process run within
// 1e-5 relative. (Only the order of fp32 sums differs between the runs.)
#include <gtest/gtest.h>

#include "src/dist/comm_world.h"
#include "tests/fsdp/fsdp_run.h"
#include "tests/fsdp/mpi_world.h"
#include "tests/common/tiny_config.h"

namespace gpt::test {
namespace {

GPTConfig small(int L, int NH, int C) {
  GPTConfig c = tiny_config(L, NH, C, 16, 97);  // odd sizes so units pad unevenly at N = 3 and 4
  return c;
}

// Relative L2 distance of two parameter sets, per unit (max over units).
double max_rel_diff(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  double worst = 0;
  for (size_t u = 0; u < a.size(); u++) {
    double d = 0, n = 0;
    for (size_t i = 0; i < a[u].size(); i++) {
      d += (double)(a[u][i] - b[u][i]) * (a[u][i] - b[u][i]);
      n += (double)b[u][i] * b[u][i];
    }
    worst = std::max(worst, std::sqrt(d / (n + 1e-30)));
  }
  return worst;
}

void expect_parity(const GPTConfig& cfg, ShardStrategy st, bool no_sync, int steps) {
  Communicator& w = world();
  RunSpec spec;
  spec.cfg = cfg;
  spec.global_seqs = 24;
  // reference: one process, the whole global batch in one micro-step
  auto single = make_single_communicator();
  ShardedRun ref(spec, *single);
  // sharded: N ranks, 2 micro-steps (accumulation), the strategy under test
  RunSpec sspec = spec;
  sspec.accum = 2;
  sspec.fsdp.strategy = st;
  sspec.fsdp.no_sync = no_sync;
  if (st == ShardStrategy::hybrid) sspec.fsdp.shard_group = w.world() % 2 == 0 ? 2 : 1;
  ShardedRun run(sspec, w);
  for (int s = 0; s < steps; s++) {
    const float a = run.train_step(), b = ref.train_step();
    EXPECT_NEAR(a, b, 1e-5 * std::fabs(b)) << FsdpOptions::name(st) << " step " << s + 1;
  }
  EXPECT_LE(max_rel_diff(run.params(), ref.params()), 1e-5) << FsdpOptions::name(st) << (no_sync ? " no-sync" : "");
}

struct Case {
  ShardStrategy st;
  bool no_sync;
};
class Parity : public ::testing::TestWithParam<Case> {};

TEST_P(Parity, D2TwentySteps) { expect_parity(small(2, 2, 128), GetParam().st, GetParam().no_sync, 20); }
TEST_P(Parity, D4TwentySteps) { expect_parity(small(4, 4, 256), GetParam().st, GetParam().no_sync, 20); }

INSTANTIATE_TEST_SUITE_P(AllStrategies, Parity,
                         ::testing::Values(Case{ShardStrategy::full, false}, Case{ShardStrategy::full, true},
                                           Case{ShardStrategy::grad_op, false}, Case{ShardStrategy::grad_op, true},
                                           Case{ShardStrategy::none, false}, Case{ShardStrategy::none, true},
                                           Case{ShardStrategy::hybrid, false}, Case{ShardStrategy::hybrid, true}),
                         [](const auto& info) {
                           return std::string(FsdpOptions::name(info.param.st)) + (info.param.no_sync ? "_nosync" : "_sync");
                         });

}  // namespace
}  // namespace gpt::test
