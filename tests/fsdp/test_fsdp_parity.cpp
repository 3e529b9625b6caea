// Parity: N ranks train exactly what one process trains. For every strategy (full, grad_op, none,
// hybrid), with and without --no-sync gradient accumulation, on d2- and d4-shaped models, 20 steps of
// the same global batches give losses and final parameters equal to the single-process run within
// kParityMultiple times the fp32 noise floor of that run on this CPU and build: the difference the same
// process shows when it only sums in another order (gradient accumulation). tests/fsdp/noise_floor.h
// measures the floor and derives the multiple. Each case prints a "[parity]" line (scripts/isa_matrix.sh
// collects them).
#include <gtest/gtest.h>

#include <map>

#include "src/dist/comm_world.h"
#include "tests/common/tiny_config.h"
#include "tests/fsdp/fsdp_run.h"
#include "tests/fsdp/mpi_world.h"
#include "tests/fsdp/noise_floor.h"

namespace gpt::test {
namespace {

constexpr int kSteps = 20;

GPTConfig small(int L, int NH, int C) {
  GPTConfig c = tiny_config(L, NH, C, 16, 97);  // odd sizes so units pad unevenly at N = 3 and 4
  return c;
}

RunSpec reference_spec(const GPTConfig& cfg) {
  RunSpec spec;
  spec.cfg = cfg;
  spec.global_seqs = 24;
  return spec;
}

// The reference and its floor, measured once per model shape and shared by the strategies' cases (every
// rank reaches the first case of a shape together, so the floor's broadcasts line up).
const NoiseFloor& floor_of(const std::string& name, const GPTConfig& cfg) {
  static std::map<std::string, NoiseFloor> floors;
  auto it = floors.find(name);
  if (it == floors.end()) {
    it = floors.emplace(name, measure_noise_floor(reference_spec(cfg), kSteps, world())).first;
    if (world().rank() == 0) print_floor("model=" + name, it->second);
  }
  return it->second;
}

struct Case {
  ShardStrategy st;
  bool no_sync;
  std::string label() const { return std::string(FsdpOptions::name(st)) + (no_sync ? "_nosync" : "_sync"); }
};

void expect_parity(const std::string& name, const GPTConfig& cfg, const Case& c) {
  Communicator& w = world();
  const NoiseFloor& f = floor_of(name, cfg);
  // sharded: N ranks, 2 micro-steps (accumulation), the strategy under test
  RunSpec sspec = reference_spec(cfg);
  sspec.accum = 2;
  sspec.fsdp.strategy = c.st;
  sspec.fsdp.no_sync = c.no_sync;
  if (c.st == ShardStrategy::hybrid) sspec.fsdp.shard_group = w.world() % 2 == 0 ? 2 : 1;
  ShardedRun run(sspec, w);
  std::vector<float> losses;
  for (int s = 0; s < kSteps; s++) {
    losses.push_back(run.train_step());
    EXPECT_LE(rel(losses[s], f.ref.losses[s]), f.loss_bound(s))
        << c.label() << " step " << s + 1 << ": loss " << losses[s] << ", one process " << f.ref.losses[s]
        << ", floor " << f.loss[s];
  }
  const auto params = run.params();
  const ParityMeasure m = measure_parity(f, losses, 0, params);
  EXPECT_LE(m.params_diff, f.params_bound()) << c.label() << ": floor " << f.params;
  if (w.rank() == 0) print_parity("model=" + name + " case=" + c.label(), w.world(), f, m);
}

class Parity : public ::testing::TestWithParam<Case> {};

TEST_P(Parity, D2TwentySteps) { expect_parity("d2", small(2, 2, 128), GetParam()); }
TEST_P(Parity, D4TwentySteps) { expect_parity("d4", small(4, 4, 256), GetParam()); }

INSTANTIATE_TEST_SUITE_P(AllStrategies, Parity,
                         ::testing::Values(Case{ShardStrategy::full, false}, Case{ShardStrategy::full, true},
                                           Case{ShardStrategy::grad_op, false}, Case{ShardStrategy::grad_op, true},
                                           Case{ShardStrategy::none, false}, Case{ShardStrategy::none, true},
                                           Case{ShardStrategy::hybrid, false}, Case{ShardStrategy::hybrid, true}),
                         [](const auto& info) { return info.param.label(); });

}  // namespace
}  // namespace gpt::test
