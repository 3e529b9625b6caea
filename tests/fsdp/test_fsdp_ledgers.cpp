// Memory and traffic of the FSDP engine, read from the ledgers and asserted against the formulas:
//   model states per rank = 16 * sum_u ceil(psi_u / G) bytes (fp32 param, grad, m, v; G = shard group)
//   gathered params = padded(embed) + K * max padded(other unit)   (root unit + K rotating slots)
//   traffic per step (ring accounting, fp32 on CPU ranks, 4 bytes/element, N ranks):
//     full    all-gather (2*Psi - psi_embed)*(N-1)/N (embed is gathered once: root unit) + reduce-scatter Psi*(N-1)/N
//     grad_op all-gather Psi*(N-1)/N + reduce-scatter Psi*(N-1)/N
//     none    all-reduce 2*Psi*(N-1)/N
// with Psi and psi_u counted after padding to a multiple of N. Also: a world larger than a unit trains
// what one process trains, within the parity bound of noise_floor.h.
#include <gtest/gtest.h>

#include <algorithm>

#include "src/dist/comm_world.h"
#include "tests/fsdp/fsdp_run.h"
#include "tests/fsdp/mpi_world.h"
#include "tests/fsdp/noise_floor.h"
#include "src/core/check.h"
#include "src/train/config_hash.h"
#include "tests/common/tiny_config.h"

namespace gpt::test {
namespace {

RunSpec spec_for(ShardStrategy st, int N) {
  RunSpec s;
  s.cfg = tiny_config(2, 2, 64, 16, 101);
  s.fsdp.strategy = st;
  s.global_seqs = 12;
  (void)N;
  return s;
}

TEST(FsdpMemory, ModelStatesAreSixteenBytesPerShardedParameter) {
  Communicator& w = world();
  const int N = w.world();
  for (ShardStrategy st : {ShardStrategy::full, ShardStrategy::grad_op, ShardStrategy::none}) {
    ShardedRun run(spec_for(st, N), w);
    const Layout& l = run.model->layout();
    const int G = st == ShardStrategy::none ? 1 : N;
    int64_t shard_elems = 0;
    for (int u = 0; u < l.num_units(); u++) shard_elems += (l.unit(u).numel + G - 1) / G;
    const MemoryLedger& led = run.be->ledger();
    const int64_t states = led.current(MemDomain::device, MemCat::param_shard) +
                           led.current(MemDomain::device, MemCat::grad_shard) +
                           led.current(MemDomain::device, MemCat::optim_state);
    EXPECT_EQ(states, 16 * shard_elems) << FsdpOptions::name(st);
    EXPECT_EQ(run.engine->model_state_bytes(), 16 * shard_elems);
    if (st == ShardStrategy::none) {
      EXPECT_EQ(states, 16 * l.total_numel());
    }
    // padding costs at most one element per unit per rank
    EXPECT_LE(states, 16 * (l.total_numel() / G + l.num_units()));
  }
}

TEST(FsdpMemory, GatheredParametersBoundedBySlots) {
  Communicator& w = world();
  const int N = w.world();
  RunSpec s = spec_for(ShardStrategy::full, N);
  s.fsdp.gather_slots = 2;
  ShardedRun run(s, w);
  run.be->ledger().reset_peaks();
  run.train_step();
  const Layout& l = run.model->layout();
  int64_t max_other = 0;
  for (int u = 1; u < l.num_units(); u++) max_other = std::max(max_other, (l.unit(u).numel + N - 1) / N * N);
  const int64_t root = (l.unit(0).numel + N - 1) / N * N;
  const int64_t peak = run.be->ledger().peak(MemDomain::device, MemCat::gathered_param);
  if (N == 1) {
    EXPECT_EQ(peak, 0);  // one rank, fp32: the model reads the shards directly, nothing is gathered
  } else {
    EXPECT_EQ(peak, 4 * (root + 2 * max_other));
    int64_t largest = std::max(root, max_other);
    EXPECT_LE(peak, 4 * (largest + 2 * max_other));
  }
}

struct Traffic {
  int64_t ag, rs, ar;
};
Traffic one_step_traffic(ShardStrategy st, bool no_sync, int accum) {
  RunSpec s = spec_for(st, world().world());
  s.fsdp.no_sync = no_sync;
  s.accum = accum;
  ShardedRun run(s, world());
  run.engine->begin_traffic_step();
  run.train_step();
  CommCounters c = run.engine->traffic_step();
  return {c.bytes_sent[(int)CollKind::all_gather], c.bytes_sent[(int)CollKind::reduce_scatter],
          c.bytes_sent[(int)CollKind::all_reduce]};
}

TEST(FsdpTraffic, PerStepBytesMatchTheFormulas) {
  const int N = world().world();
  RunSpec s = spec_for(ShardStrategy::full, N);
  Layout l(s.cfg);
  int64_t psi = 0, psi_unpadded = 0;
  for (int u = 0; u < l.num_units(); u++) psi += (l.unit(u).numel + N - 1) / N * N, psi_unpadded += l.unit(u).numel;
  const int64_t root = (l.unit(0).numel + N - 1) / N * N;
  Traffic full = one_step_traffic(ShardStrategy::full, false, 1);
  EXPECT_EQ(full.ag, 4 * (2 * psi - root) * (N - 1) / N);
  EXPECT_EQ(full.rs, 4 * psi * (N - 1) / N);
  EXPECT_EQ(full.ar, 0);
  Traffic gop = one_step_traffic(ShardStrategy::grad_op, false, 1);
  EXPECT_EQ(gop.ag, 4 * psi * (N - 1) / N);
  EXPECT_EQ(gop.rs, 4 * psi * (N - 1) / N);
  Traffic ddp = one_step_traffic(ShardStrategy::none, false, 1);
  int64_t ar = 0;  // one all-reduce per unit, ring figure 2*c*4*(N-1)/N each
  for (int u = 0; u < l.num_units(); u++) ar += 2 * l.unit(u).numel * 4 * (N - 1) / N;
  EXPECT_EQ(ddp.ar, ar);
  EXPECT_EQ(ddp.ag + ddp.rs, 0);
  if (N == 1) {
    EXPECT_EQ(full.ag + full.rs + gop.ag + ddp.ar, 0);
  }
  (void)psi_unpadded;
}

TEST(FsdpTraffic, NoSyncReducesOncePerStep) {
  const int N = world().world();
  Layout l(spec_for(ShardStrategy::full, N).cfg);
  int64_t psi = 0;
  for (int u = 0; u < l.num_units(); u++) psi += (l.unit(u).numel + N - 1) / N * N;
  Traffic sync = one_step_traffic(ShardStrategy::full, false, 2);
  Traffic nosync = one_step_traffic(ShardStrategy::full, true, 2);
  EXPECT_EQ(sync.rs, 2 * 4 * psi * (N - 1) / N);  // every micro-step reduce-scatters
  EXPECT_EQ(nosync.rs, 4 * psi * (N - 1) / N);    // only the last one
  EXPECT_EQ(sync.ag, nosync.ag);
}

TEST(FsdpStartup, MismatchedConfigsAreDetectedOnEveryRank) {
  Communicator& w = world();
  TrainOptions o;
  o.model = spec_for(ShardStrategy::full, w.world()).cfg;
  EXPECT_NO_THROW(check_same_config_on_all_ranks(w, o));
  if (w.world() == 1) return;
  if (w.rank() == w.world() - 1) o.B = 7;  // one rank launched with different flags
  EXPECT_THROW(check_same_config_on_all_ranks(w, o), gpt::Error);
}

TEST(FsdpShapes, WorldLargerThanAUnitStillMatchesOneProcess) {
  // C = 1: the head unit has 2 elements, fewer than the ranks at N = 3, 4; those ranks own only padding
  RunSpec s;
  s.cfg = tiny_config(1, 1, 1, 4, 7);
  s.T = 4;
  s.global_seqs = 12;
  const int steps = 5;
  const NoiseFloor f = measure_noise_floor(s, steps, world());  // and the single-process run
  ShardedRun run(s, world());
  std::vector<float> losses;
  for (int i = 0; i < steps; i++) {
    losses.push_back(run.train_step());
    EXPECT_LE(rel(losses[i], f.ref.losses[i]), f.loss_bound(i))
        << "step " << i + 1 << ": loss " << losses[i] << ", one process " << f.ref.losses[i] << ", floor " << f.loss[i];
  }
  const ParityMeasure m = measure_parity(f, losses, 0, run.params());
  EXPECT_LE(m.params_diff, f.params_bound()) << "floor " << f.params;
  if (world().rank() == 0) {
    print_floor("model=c1", f);
    print_parity("model=c1 case=full_sync", world().world(), f, m);
  }
}

}  // namespace
}  // namespace gpt::test
