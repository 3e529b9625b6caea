// The simulated step's communication ledger (src/sim/sim_step.h), which the start-up traffic line prints,
// against the FSDP / ZeRO volumes worked out by hand from the layout: the root unit gathered once per step
// under full (so 2 Psi - psi_embed gathered, not 2 Psi), grad_op's single gather, none's all-reduce, and
// hybrid's replica all-reduce of the grad shards over N/G ranks, per call in ring accounting
// (src/dist/comm_volume.h). A second copy of the schedule would drift; the sim has none to drift.
#include <gtest/gtest.h>

#include <string>

#include "src/core/check.h"
#include "src/model/layout.h"
#include "src/sim/sim_step.h"
#include "tests/common/tiny_config.h"

namespace gpt::test {
namespace {

struct Volumes {
  int64_t all_gather = 0, reduce_scatter = 0, all_reduce = 0;
};

// By hand: units padded to a multiple of G, each rank's shard = padded / G.
Volumes by_hand(const Layout& l, ShardStrategy st, int N, int G, int64_t cs, int64_t rs, int accum, bool no_sync) {
  Volumes v;
  const int R = N / G;  // replica group
  const int reductions = no_sync ? 1 : accum;
  for (int u = 0; u < l.num_units(); u++) {
    const int64_t padded = (l.unit(u).numel + G - 1) / G * G, shard = padded / G;
    if (st == ShardStrategy::none) {
      v.all_reduce += reductions * (2 * padded * rs * (N - 1) / N);
      continue;
    }
    const int gathers = st == ShardStrategy::grad_op || u == l.embed_unit() ? 1 : 2;
    v.all_gather += accum * gathers * shard * cs * (G - 1);
    v.reduce_scatter += reductions * shard * rs * (G - 1);
    if (R > 1) v.all_reduce += reductions * (2 * shard * rs * (R - 1) / R);
  }
  return v;
}

sim::SimResult simulate(const GPTConfig& cfg, ShardStrategy st, int N, int G, DType compute, DType reduce, int accum,
                        bool no_sync) {
  sim::SimRun r;
  r.run.cfg = cfg;
  r.run.world = N;
  r.run.fsdp.strategy = st;
  r.run.fsdp.shard_group = st == ShardStrategy::hybrid ? G : 0;
  r.run.fsdp.reduce_dtype = reduce;
  r.run.fsdp.no_sync = no_sync;
  r.run.B = 2;
  r.run.T = 16;
  r.run.compute = compute;
  r.grad_accum = accum;
  return sim::simulate_step(r);
}

TEST(SimTraffic, LedgerFollowsTheVolumesWorkedOutByHand) {
  const GPTConfig cfg = tiny_config(3, 2, 64, 32, 101);  // 101: the padded vocabulary is not a multiple of N
  const Layout l(cfg);
  struct Case {
    ShardStrategy st;
    int N, G;
  };
  const Case cases[] = {{ShardStrategy::full, 1, 1},   {ShardStrategy::full, 3, 3},   {ShardStrategy::full, 4, 4},
                        {ShardStrategy::grad_op, 4, 4}, {ShardStrategy::none, 3, 1},   {ShardStrategy::none, 4, 1},
                        {ShardStrategy::hybrid, 4, 2},  {ShardStrategy::hybrid, 6, 3}, {ShardStrategy::hybrid, 8, 2}};
  for (const Case& c : cases)
    for (DType compute : {DType::F32, DType::BF16})
      for (DType reduce : {DType::F32, DType::BF16})
        for (int accum : {1, 3})
          for (bool no_sync : {false, true}) {
            const sim::SimResult r = simulate(cfg, c.st, c.N, c.G, compute, reduce, accum, no_sync);
            const Volumes v = by_hand(l, c.st, c.N, c.G, (int64_t)dtype_size(compute),
                                      c.N > 1 ? (int64_t)dtype_size(reduce) : 4, accum, no_sync);
            const std::string what = str(FsdpOptions::name(c.st), " N=", c.N, " G=", c.G, " compute ",
                                         dtype_name(compute), " reduce ", dtype_name(reduce), " accum ", accum,
                                         no_sync ? " no-sync" : "");
            EXPECT_EQ(r.bytes[(int)CollKind::all_gather], v.all_gather) << what;
            EXPECT_EQ(r.bytes[(int)CollKind::reduce_scatter], v.reduce_scatter) << what;
            EXPECT_EQ(r.bytes[(int)CollKind::all_reduce], v.all_reduce) << what;
          }
}

TEST(SimTraffic, TheFullRootUnitIsGatheredOncePerMicroStep) {
  // 2 Psi - psi_embed, not the 2 Psi the old start-up line printed
  const GPTConfig cfg = tiny_config(2, 2, 64, 32, 128);
  const Layout l(cfg);
  const sim::SimResult r = simulate(cfg, ShardStrategy::full, 4, 4, DType::F32, DType::F32, 1, false);
  const int64_t psi = l.total_numel(), embed = l.unit(l.embed_unit()).numel;
  ASSERT_EQ(psi % 4, 0);
  ASSERT_EQ(embed % 4, 0);
  EXPECT_EQ(r.bytes[(int)CollKind::all_gather], (2 * psi - embed) * 4 * 3 / 4);
  EXPECT_EQ(r.calls[(int)CollKind::all_gather], 2 * (l.num_units() - 1) + 1);
}

TEST(SimTraffic, TheStartUpLineNamesEveryKindAndTheTotal) {
  const GPTConfig cfg = tiny_config(2, 2, 64, 32, 128);
  const sim::SimResult r = simulate(cfg, ShardStrategy::hybrid, 4, 2, DType::F32, DType::F32, 2, false);
  const std::string line = sim::traffic_line(r, 2);
  EXPECT_EQ(line.rfind("traffic per step per rank (2 micro-steps, the simulated step's ledger): all_gather ", 0), 0u)
      << line;
  for (const char* kind : {"all_gather", "reduce_scatter", "all_reduce"}) EXPECT_NE(line.find(kind), std::string::npos) << line;
  const double total = (r.bytes[0] + r.bytes[1] + r.bytes[2]) / 1048576.0;
  EXPECT_NE(line.find(str("= ", total, " MiB")), std::string::npos) << line;
  EXPECT_NE(sim::traffic_line(simulate(cfg, ShardStrategy::full, 1, 1, DType::F32, DType::F32, 1, false), 1).find("none"),
            std::string::npos);
}

}  // namespace
}  // namespace gpt::test
