// The naive engine (src/fsdp/naive_engine.h) is the full engine's arithmetic without its scheduling. On the
// cpu backend, 20 optimizer steps of the same run under both engines give bit-identical losses and final
// parameters, at every world size the suite runs (1 to 4 ranks: 3 pads unevenly), for each strategy the
// naive engine has (full, grad_op, none), plainly and with the model's own levers (recompute, a wide wrap,
// activation offload), which act on the model and leave the engine's protocol as it is.
// Two micro-steps per step where the engine reduces (N > 1), so accumulation is covered. At N = 1 the full
// engine has nothing to reduce and backward accumulates straight into the grad shards (DirectGrads,
// src/fsdp/resident.h) across micro-steps, which sums a micro-step's contributions in another order than
// one buffer per micro-step does; so N = 1 runs one micro-step, where the two orders are the same sum.
// Also here: the options the naive engine has no code for are one-line errors naming the flag.
#include <gtest/gtest.h>

#include <cstring>

#include "src/fsdp/naive_engine.h"
#include "tests/common/error_of.h"
#include "tests/common/tiny_config.h"
#include "tests/fsdp/fsdp_run.h"
#include "tests/fsdp/mpi_world.h"

namespace gpt::test {
namespace {

constexpr int kSteps = 20;

struct Trained {
  std::vector<float> losses;
  std::vector<std::vector<float>> init, params;  // [unit] before the first step, after the last
};

Trained train(RunSpec spec, EngineKind engine) {
  spec.fsdp.engine = engine;
  ShardedRun run(spec, world());
  Trained t;
  t.init = run.params();
  for (int s = 0; s < kSteps; s++) t.losses.push_back(run.train_step());
  t.params = run.params();
  return t;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

struct Case {
  ShardStrategy st;
  bool model_levers;  // recompute full, --wrap blocks:2, --offload activations
  std::string label() const { return std::string(FsdpOptions::name(st)) + (model_levers ? "_levers" : ""); }
};

class NaiveVsFull : public ::testing::TestWithParam<Case> {};

TEST_P(NaiveVsFull, TwentyStepsBitIdenticalToTheFullEngine) {
  const Case c = GetParam();
  RunSpec spec;
  spec.cfg = tiny_config(4, 2, 64, 16, 97);  // odd vocabulary: units pad unevenly at N = 3 and 4
  spec.global_seqs = 24;
  spec.accum = world().world() > 1 ? 2 : 1;  // see the top
  spec.fsdp.strategy = c.st;
  if (c.model_levers) {
    spec.recompute = RecomputePolicy::parse("full");
    spec.wrap = WrapPolicy::parse("blocks:2");
    spec.offload_activations = true;
  }
  const Trained full = train(spec, EngineKind::full), naive = train(spec, EngineKind::naive);
  EXPECT_TRUE(same_bits(naive.losses, full.losses)) << c.label();
  ASSERT_EQ(naive.params.size(), full.params.size());
  for (size_t u = 0; u < full.params.size(); u++)
    EXPECT_TRUE(same_bits(naive.params[u], full.params[u])) << c.label() << ": unit " << u;
  // the runs trained: a test of two frozen runs would pass for nothing
  for (size_t u = 0; u < full.params.size(); u++)
    EXPECT_FALSE(same_bits(full.params[u], full.init[u])) << c.label() << ": unit " << u << " never moved";
}

INSTANTIATE_TEST_SUITE_P(Strategies, NaiveVsFull,
                         ::testing::Values(Case{ShardStrategy::full, false}, Case{ShardStrategy::grad_op, false},
                                           Case{ShardStrategy::none, false}, Case{ShardStrategy::full, true},
                                           Case{ShardStrategy::grad_op, true}, Case{ShardStrategy::none, true}),
                         [](const auto& info) { return info.param.label(); });

TEST(NaiveEngineOptions, WhatItHasNoCodeForIsAOneLineError) {
  const GPTConfig cfg = tiny_config(2, 2, 64, 16, 97);
  auto refused = [&](void (*set)(FsdpOptions&)) {
    FsdpOptions o;
    o.engine = EngineKind::naive;
    set(o);
    RunSpec spec;
    spec.cfg = cfg;
    spec.fsdp = o;
    return error_of([&] { ShardedRun run(spec, world()); });
  };
  EXPECT_NE(refused([](FsdpOptions& o) {
              o.strategy = ShardStrategy::hybrid;
              o.shard_group = 1;
            }).find("--engine naive: --shard hybrid"),
            std::string::npos);
  EXPECT_NE(refused([](FsdpOptions& o) { o.offload = OffloadMode::params; }).find("--engine naive: --offload params"),
            std::string::npos);
  EXPECT_NE(refused([](FsdpOptions& o) { o.offload = OffloadMode::optimizer; }).find("--offload optimizer"),
            std::string::npos);
  EXPECT_NE(refused([](FsdpOptions& o) { o.no_sync = true; }).find("--engine naive: --no-sync"), std::string::npos);
  EXPECT_NE(refused([](FsdpOptions& o) { o.reduce_dtype = DType::BF16; }).find("--engine naive: --reduce-dtype bf16"),
            std::string::npos);
}

}  // namespace
}  // namespace gpt::test
