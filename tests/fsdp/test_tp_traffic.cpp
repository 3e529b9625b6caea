// The tensor-parallel group's traffic, read from its communication ledger after one training step and held
// equal, byte for byte, to the closed form of docs/tensor_parallel.md (ring accounting, src/dist/comm_volume.h;
// fp32 on CPU ranks; S = B*T*C*4 bytes, the activations of one micro-batch; T ranks in the group):
//   without sequence parallelism, per micro-step: 4L + 2 all-reduces of S (per block 2 in forward, after
//     attproj and fcproj, and 2 in backward, of the column-parallel inputs' gradients; the embedding's lookup
//     in forward; the final layernorm's input gradient in backward), each 2 S (T-1)/T;
//   with it: 4L + 2 all-gathers and 4L + 2 reduce-scatters of S (the same bytes, S (T-1)/T each), and one
//     all-reduce per unit of its replicated span's partial gradients (fp32);
//   both: the vocab-parallel loss's two all-reduces of N and 2N fp32 statistics;
//   recompute: a recomputed block re-issues what it re-runs: under full recompute the attproj sum (and with
//     sequence parallelism the ln1 and ln2 gathers), under selective the ln1 and ln2 gathers (sequence
//     parallelism) and nothing without.
// And the engine's traffic is FSDP's over the data-parallel group, of this rank's slices of the units.
#include <gtest/gtest.h>

#include "src/dist/comm_volume.h"
#include "tests/common/tiny_config.h"
#include "tests/fsdp/fsdp_run.h"
#include "tests/fsdp/mpi_world.h"

namespace gpt::test {
namespace {

struct Expected {
  int64_t ag = 0, rs = 0, ar = 0;
  int64_t ag_calls = 0, rs_calls = 0, ar_calls = 0;
};

Expected closed_form(const RunSpec& s, int B, const Layout& layout) {
  const int T = s.tp.size, L = s.cfg.num_layers;
  const int64_t N = (int64_t)B * s.T, C = s.cfg.channels, S = N * C;  // S in elements
  Expected e;
  auto ar = [&](int64_t elems, int calls) {
    e.ar += calls * ring_all_reduce_bytes((size_t)elems, DType::F32, T);
    e.ar_calls += calls;
  };
  const int per_micro = 4 * L + 2;
  const bool full = s.recompute.mode == RecomputePolicy::Mode::full, sel = s.recompute.selective();
  if (!s.tp.sequence_parallel) {
    ar(S, per_micro + (full ? L : 0));
  } else {
    const int ag_calls = per_micro + (full || sel ? 2 * L : 0), rs_calls = per_micro + (full ? L : 0);
    e.ag = ag_calls * ring_all_gather_bytes((size_t)(S / T), DType::F32, T);
    e.rs = rs_calls * ring_reduce_scatter_bytes((size_t)(S / T), DType::F32, T);
    e.ag_calls = ag_calls;
    e.rs_calls = rs_calls;
    for (int u = 0; u < layout.num_units(); u++) ar(layout.replicated_span(u).numel, 1);
  }
  ar(N, 1);      // the loss's row maxima
  ar(2 * N, 1);  // its target logits and sums of exponentials
  for (Expected* x : {&e}) {
    x->ag *= s.accum, x->rs *= s.accum, x->ar *= s.accum;
    x->ag_calls *= s.accum, x->rs_calls *= s.accum, x->ar_calls *= s.accum;
  }
  return e;
}

TEST(TpTraffic, TheLedgerEqualsTheClosedForm) {
  Communicator& w = world();
  const int N = w.world();
  if (N != 2 && N != 4) GTEST_SKIP() << "needs 2 or 4 ranks";
  for (int T : {2, 4}) {
    if (N % T) continue;
    for (bool sp : {false, true})
      for (const char* rc : {"none", "full", "selective"}) {
        RunSpec s;
        s.cfg = tiny_config(3, 4, 64, 16, 97);
        s.T = 16;
        s.tp = TpOptions{T, sp};
        s.recompute = RecomputePolicy::parse(rc);
        s.accum = 2;
        s.global_seqs = 4 * (N / T) * s.accum;  // B = 4 per data-parallel rank
        ShardedRun run(s, w);
        run.mesh.tp->ledger().begin_step();
        run.train_step();
        const CommCounters c = run.mesh.tp->ledger().step();
        const Expected e = closed_form(s, 4, run.model->layout());
        const std::string what = str("T=", T, sp ? " sp" : " no sp", " recompute ", rc);
        EXPECT_EQ(c.bytes_sent[(int)CollKind::all_gather], e.ag) << what;
        EXPECT_EQ(c.bytes_sent[(int)CollKind::reduce_scatter], e.rs) << what;
        EXPECT_EQ(c.bytes_sent[(int)CollKind::all_reduce], e.ar) << what;
        EXPECT_EQ(c.calls[(int)CollKind::all_gather], e.ag_calls) << what;
        EXPECT_EQ(c.calls[(int)CollKind::reduce_scatter], e.rs_calls) << what;
        EXPECT_EQ(c.calls[(int)CollKind::all_reduce], e.ar_calls) << what;
      }
  }
}

// FSDP's traffic over the data-parallel group of 2 (T = 2 at 4 ranks, --shard full): the all-gathers move
// (2 Psi_l - psi_embed,l)(DP-1)/DP and the reduce-scatter Psi_l (DP-1)/DP per micro-step, Psi_l this rank's
// slices of the units padded to a multiple of DP (the root unit gathered once per step: the engine's rule).
TEST(TpTraffic, TheEngineMovesTheSlicesOverTheDataParallelGroup) {
  Communicator& w = world();
  if (w.world() != 4) GTEST_SKIP() << "needs 4 ranks (2 x 2)";
  RunSpec s;
  s.cfg = tiny_config(3, 4, 64, 16, 97);
  s.T = 16;
  s.tp = TpOptions{2, true};
  s.global_seqs = 8;
  ShardedRun run(s, w);
  run.engine->begin_traffic_step();
  run.train_step();
  const CommCounters c = run.engine->traffic_step();
  const int DP = 2;
  int64_t psi = 0, root = 0;
  for (int u = 0; u < run.model->layout().num_units(); u++) {
    const int64_t padded = (run.model->layout().unit(u).numel + DP - 1) / DP * DP;
    psi += padded;
    if (u == 0) root = padded;
  }
  EXPECT_EQ(c.bytes_sent[(int)CollKind::all_gather], (2 * psi - root) * 4 * (DP - 1) / DP);
  EXPECT_EQ(c.bytes_sent[(int)CollKind::reduce_scatter], psi * 4 * (DP - 1) / DP);
}

}  // namespace
}  // namespace gpt::test
