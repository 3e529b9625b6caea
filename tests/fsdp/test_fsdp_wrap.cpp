// Wrap policies at the current world size (the binary runs at 1..4 ranks): every wrap trains the same bits as
// one block per unit (the same products in the same order; a unit is only where the parameters lie), under
// each strategy, with accumulation and with offload; the communication ledger's collective count follows the
// unit count exactly (2 gathers and 1 reduce-scatter per block unit per micro-step under full, the root's one
// of each), and the bytes stay those of the parameters, up to each unit's padding to the group size.
#include <gtest/gtest.h>

#include "tests/common/tiny_config.h"
#include "tests/fsdp/fsdp_run.h"
#include "tests/fsdp/mpi_world.h"

namespace gpt::test {
namespace {

constexpr int kSteps = 6;

RunSpec base_spec() {
  RunSpec s;
  s.cfg = tiny_config(5, 2, 32, 16, 61);  // 5 layers: blocks:2 and blocks:3 leave a shorter last unit
  s.global_seqs = 12;
  return s;
}

struct Trained {
  std::vector<float> losses;
  std::vector<std::vector<float>> params;
  CommCounters traffic;  // of the last step
  int units = 0;
};

Trained train(const RunSpec& s) {
  ShardedRun run(s, world());
  Trained t;
  for (int i = 0; i < kSteps; i++) {
    run.engine->begin_traffic_step();
    t.losses.push_back(run.train_step());
  }
  t.traffic = run.engine->traffic_step();
  t.params = run.params();
  t.units = run.engine->num_units();
  return t;
}

std::vector<WrapPolicy> wraps(const GPTConfig& c) {
  const int64_t block = Layout(c).block_numel();
  return {WrapPolicy::parse("blocks:2"), WrapPolicy::parse("blocks:3"), WrapPolicy::parse("blocks:5"),
          WrapPolicy::parse("min-params:" + std::to_string(2 * block - 1))};  // two blocks reach it
}

TEST(FsdpWrap, EveryWrapTrainsTheSameBitsAsOneBlockPerUnit) {
  const int N = world().world();
  std::vector<FsdpOptions> modes(4);
  modes[1].strategy = ShardStrategy::grad_op;
  modes[2].strategy = ShardStrategy::none;
  modes[3].offload = OffloadMode::params;
  if (N == 4) {
    modes.emplace_back();
    modes.back().strategy = ShardStrategy::hybrid;
    modes.back().shard_group = 2;
  }
  for (const FsdpOptions& o : modes) {
    for (int accum : {1, 2}) {
      RunSpec s = base_spec();
      s.fsdp = o;
      s.accum = accum;
      const Trained ref = train(s);
      for (const WrapPolicy& w : wraps(s.cfg)) {
        RunSpec r = s;
        r.wrap = w;
        const Trained got = train(r);
        const std::string what = std::string(FsdpOptions::name(o.strategy)) + " offload " +
                                 FsdpOptions::name(o.offload) + " accum " + std::to_string(accum) + " wrap " + w.str();
        EXPECT_EQ(got.losses, ref.losses) << what;
        EXPECT_EQ(got.params, ref.params) << what;
      }
    }
  }
}

TEST(FsdpWrap, CollectivesFollowTheUnitCountAndTheBytesStay) {
  const int N = world().world();
  if (N == 1) GTEST_SKIP() << "one rank communicates nothing";
  RunSpec s = base_spec();
  s.accum = 2;
  const GPTConfig& c = s.cfg;
  const Trained block = train(s);
  for (WrapPolicy w : wraps(c)) {
    RunSpec r = s;
    r.wrap = w;
    const Trained t = train(r);
    const int blocks = t.units - 1;
    EXPECT_EQ(t.units, (int)Layout(c, w).num_units()) << w.str();
    // Per micro-step under full: each block unit gathered for forward and for backward, the root once (it
    // stays gathered from forward's start to backward's end); one reduce-scatter per unit.
    EXPECT_EQ(t.traffic.calls[(int)CollKind::all_gather], s.accum * (2 * blocks + 1)) << w.str();
    EXPECT_EQ(t.traffic.calls[(int)CollKind::reduce_scatter], s.accum * (blocks + 1)) << w.str();
    // Bytes: each rank sends (N-1)/N of every padded unit per collective; padding is below N elements per unit.
    const Layout layout(c, w);
    int64_t gathered = 0, reduced = 0;
    for (int u = 0; u < layout.num_units(); u++) {
      const int64_t padded = (layout.unit(u).numel + N - 1) / N * N, sent = padded / N * (N - 1) * 4;
      gathered += s.accum * (layout.is_root(u) ? 1 : 2) * sent;
      reduced += s.accum * sent;
    }
    EXPECT_EQ(t.traffic.bytes_sent[(int)CollKind::all_gather], gathered) << w.str();
    EXPECT_EQ(t.traffic.bytes_sent[(int)CollKind::reduce_scatter], reduced) << w.str();
    // Against one block per unit: the same parameters on the wire, up to under N elements of padding per unit.
    for (CollKind k : {CollKind::all_gather, CollKind::reduce_scatter})
      EXPECT_LE(std::abs(t.traffic.bytes_sent[(int)k] - block.traffic.bytes_sent[(int)k]),
                (int64_t)(2 * s.accum + 1) * block.units * N * 4)
          << w.str();
  }
}

}  // namespace
}  // namespace gpt::test
