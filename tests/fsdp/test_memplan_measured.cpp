// The memory planner (src/plan/memplan.h) against the memory ledger of real sharded runs. For d2-, d4-
// and d6-shaped models (their L, NH and C, with a byte vocabulary and seq-len 64 so a step is quick) at
// this process's world size, under every strategy (hybrid with groups of 2 when the world size is even),
// every recompute mode and every offload mode (every combination for each shape), plus --gather-slots 3
// and --no-sync with two micro-steps, every wrap and activation offload: build the run, reset the ledger's peaks, take one training step, and require the measured peaks — device total,
// host total, and every category in both domains — to EQUAL the plan, byte for byte (the planner mirrors
// the allocations, so no tolerance is needed). The plan's geometry (Psi, owned parameters, slot sizes) is
// checked against the Layout and the engine as well.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "src/core/check.h"
#include "src/fsdp/engine.h"
#include "tests/fsdp/fsdp_run.h"
#include "tests/fsdp/mpi_world.h"
#include "src/plan/memplan.h"
#include "tests/common/tiny_config.h"

namespace gpt::test {
namespace {

struct Shape {
  const char* name;
  int L, NH, C;
  int B, T;  // per-rank micro-batch for the sweep
};
// Step time is dominated by the parameters (gathers, reductions, AdamW), so the bigger shapes get small batches.
constexpr Shape kShapes[] = {{"d2", 2, 2, 128, 2, 32}, {"d4", 4, 4, 256, 1, 32}, {"d6", 6, 6, 384, 1, 16}};

GPTConfig shaped(const Shape& s) {
  GPTConfig c = tiny_config(s.L, s.NH, s.C, 64, 257);
  return c;
}

std::vector<ShardStrategy> strategies(int N) {
  std::vector<ShardStrategy> v = {ShardStrategy::full, ShardStrategy::grad_op, ShardStrategy::none};
  if (N % 2 == 0) v.push_back(ShardStrategy::hybrid);
  return v;
}

const char* kRecompute[] = {"none", "full", "every:2", "selective"};
const OffloadMode kOffload[] = {OffloadMode::none, OffloadMode::optimizer, OffloadMode::params};

RunSpec spec_for(const GPTConfig& cfg, const FsdpOptions& fsdp, const RecomputePolicy& rc, int B, int T, int N,
                 int accum) {
  RunSpec s;
  s.cfg = cfg;
  s.fsdp = fsdp;
  s.recompute = rc;
  s.T = T;
  s.accum = accum;
  s.global_seqs = B * N * accum;  // ShardedRun gives each rank B = global_seqs / (accum * N)
  return s;
}

MemPlanInput plan_input(const RunSpec& s, int B, int N) {
  MemPlanInput in;
  in.cfg = s.cfg;
  in.world = N;
  in.tp = s.tp;
  in.fsdp = s.fsdp;
  in.recompute = s.recompute;
  in.wrap = s.wrap;
  in.offload_activations = s.offload_activations;
  in.B = B;
  in.T = s.T;
  in.compute = DType::F32;
  return in;
}

// One step from fresh peaks, then every peak the ledger measured must equal the plan.
void expect_step_matches_plan(ShardedRun& run, const MemPlanInput& in, const std::string& what) {
  MemoryLedger& led = run.be->ledger();
  led.reset_peaks();
  run.train_step();
  const MemPlan p = plan_memory(in);
  EXPECT_EQ(led.peak_total(MemDomain::device), p.device_peak) << what << "\n" << led.summary();
  EXPECT_EQ(led.peak_total(MemDomain::host), p.host_peak) << what << "\n" << led.summary();
  for (int d = 0; d < kMemDomains; d++) {
    for (int c = 0; c < kMemCats; c++) {
      EXPECT_EQ(led.peak((MemDomain)d, (MemCat)c), p.at((MemDomain)d, (MemCat)c))
          << what << ": " << memdomain_name((MemDomain)d) << "/" << memcat_name((MemCat)c);
    }
  }
}

std::string label(const Shape& sh, const FsdpOptions& o, const RecomputePolicy& rc, int N) {
  return str(sh.name, " N=", N, " shard=", FsdpOptions::name(o.strategy), " offload=", FsdpOptions::name(o.offload),
             " recompute=", rc.str(), " slots=", o.gather_slots, o.no_sync ? " no-sync" : "");
}

FsdpOptions options(ShardStrategy st, OffloadMode off) {
  FsdpOptions o;
  o.strategy = st;
  o.offload = off;
  if (st == ShardStrategy::hybrid) o.shard_group = 2;
  return o;
}

// The sweep for one shape, on ONE ShardedRun: its engine is rebuilt for each (strategy, offload) and its
// model (which owns the activations) for each recompute policy, the old one freed first, so the ledger
// sees exactly what a fresh run of that combination holds (the fresh-run test below checks that for d2).
// The rebuilt engine's parameters stay at zero — memory does not depend on values — which keeps the sweep
// to one initialisation per shape. With all_modes every (strategy, offload) cell runs every recompute
// mode; without (d6, whose steps are the slow ones) each cell runs one mode, rotating over the cells so
// that every mode runs, each strategy with three of the four (and, at even N, each offload with all four).
void sweep_shape(const Shape& sh, bool all_modes) {
  Communicator& w = world();
  const int N = w.world();
  const GPTConfig cfg = shaped(sh);
  ShardedRun run(spec_for(cfg, options(ShardStrategy::full, OffloadMode::none), {}, sh.B, sh.T, N, 1), w);
  int cell = 0;
  for (ShardStrategy st : strategies(N)) {
    for (OffloadMode off : kOffload) {
      const FsdpOptions o = options(st, off);
      run.model.reset();
      run.engine.reset();
      run.engine = std::make_unique<FsdpEngine>(*run.be, w, Layout(cfg), o);
      run.spec.fsdp = o;
      for (int m = 0; m < 4; m++) {
        if (!all_modes && m != cell % 4) continue;
        const RecomputePolicy rc = RecomputePolicy::parse(kRecompute[m]);
        run.model.reset();
        run.model = std::make_unique<GPT>(*run.be, cfg, rc);
        run.spec.recompute = rc;
        expect_step_matches_plan(run, plan_input(run.spec, sh.B, N), label(sh, o, rc, N));
      }
      cell++;
    }
  }
}

TEST(MemPlanMeasured, D2ShapeEveryStrategyRecomputeAndOffload) { sweep_shape(kShapes[0], true); }
TEST(MemPlanMeasured, D4ShapeEveryStrategyRecomputeAndOffload) { sweep_shape(kShapes[1], true); }
TEST(MemPlanMeasured, D6ShapeEveryStrategyRecomputeAndOffload) { sweep_shape(kShapes[2], true); }

// A fresh run per recompute mode (nothing reused), and the knobs the sweep keeps at their defaults:
// three gather slots, and --no-sync with two micro-steps (persistent full-unit accumulators).
TEST(MemPlanMeasured, FreshRunsGatherSlotsAndNoSync) {
  Communicator& w = world();
  const int N = w.world();
  const Shape& sh = kShapes[0];
  const GPTConfig cfg = shaped(sh);
  for (const char* rc_name : kRecompute) {
    const RecomputePolicy rc = RecomputePolicy::parse(rc_name);
    FsdpOptions o = options(ShardStrategy::full, OffloadMode::none);
    o.gather_slots = 3;
    RunSpec spec = spec_for(cfg, o, rc, sh.B, sh.T, N, 1);
    ShardedRun run(spec, w);
    expect_step_matches_plan(run, plan_input(spec, sh.B, N), label(sh, o, rc, N));
  }
  for (ShardStrategy st : strategies(N)) {
    for (OffloadMode off : {OffloadMode::none, OffloadMode::optimizer}) {
      FsdpOptions o = options(st, off);
      o.no_sync = true;
      RunSpec spec = spec_for(cfg, o, RecomputePolicy::parse("every:2"), sh.B, sh.T, N, 2);
      ShardedRun run(spec, w);
      expect_step_matches_plan(run, plan_input(spec, sh.B, N), label(sh, o, spec.recompute, N));
    }
  }
}

// Each wrap (units of several blocks: larger gather and gradient slots), and activation offload under every
// recompute mode, alone and with the parameters offloaded (the ring on the device, every layer's kept
// buffers on the host): fresh runs, all of them under full and a rotating few under the other strategies.
TEST(MemPlanMeasured, WrapsAndActivationOffload) {
  Communicator& w = world();
  const int N = w.world();
  const Shape& sh = kShapes[1];
  const GPTConfig cfg = shaped(sh);
  int cell = 0;
  for (ShardStrategy st : strategies(N)) {
    // every form under full; the others rotate over the forms and the recompute modes (steps cost time)
    const bool all = st == ShardStrategy::full;
    // blocks:4 leaves one non-root unit, so one rotating slot however large K
    const char* wraps[] = {"blocks:2", "blocks:3", "blocks:4", "min-params:1"};
    for (int i = 0; i < 4; i++) {
      if (!all && i != cell % 4) continue;
      RunSpec spec = spec_for(cfg, options(st, OffloadMode::none), {}, sh.B, sh.T, N, 1);
      spec.wrap = WrapPolicy::parse(wraps[i]);
      ShardedRun run(spec, w);
      expect_step_matches_plan(run, plan_input(spec, sh.B, N), label(sh, spec.fsdp, spec.recompute, N) + " wrap " +
                                                                   wraps[i]);
    }
    for (int m = 0; m < 4; m++) {
      if (!all && m != cell % 4) continue;
      for (OffloadMode off : {OffloadMode::none, OffloadMode::params}) {
        RunSpec spec = spec_for(cfg, options(st, off), RecomputePolicy::parse(kRecompute[m]), sh.B, sh.T, N, 1);
        spec.offload_activations = true;
        ShardedRun run(spec, w);
        expect_step_matches_plan(run, plan_input(spec, sh.B, N), label(sh, spec.fsdp, spec.recompute, N) + ",activations");
      }
    }
    cell++;
  }
}

// --reduce-dtype bf16: each gradient slot gains a bf16 send buffer (padded) and, when G > 1, a bf16
// receive buffer (shard), both in gathered_grad; with one rank nothing is communicated and nothing is
// added. Every strategy and offload mode, and --no-sync (accumulators instead of fp32 slot data).
TEST(MemPlanMeasured, Bf16ReductionBuffers) {
  Communicator& w = world();
  const int N = w.world();
  const Shape& sh = kShapes[0];
  const GPTConfig cfg = shaped(sh);
  for (ShardStrategy st : strategies(N)) {
    for (OffloadMode off : kOffload) {
      for (bool no_sync : {false, true}) {
        if (no_sync && off == OffloadMode::params) continue;
        FsdpOptions o = options(st, off);
        o.reduce_dtype = DType::BF16;
        o.no_sync = no_sync;
        const int accum = no_sync ? 2 : 1;
        RunSpec spec = spec_for(cfg, o, RecomputePolicy::parse("none"), sh.B, sh.T, N, accum);
        ShardedRun run(spec, w);
        const MemPlanInput in = plan_input(spec, sh.B, N);
        expect_step_matches_plan(run, in, label(sh, o, spec.recompute, N) + " reduce=bf16");
        // the bf16 buffers, in closed form: 2 bytes x (root + 2 x largest other unit), padded and shard
        MemPlanInput f32_in = in;
        f32_in.fsdp.reduce_dtype = DType::F32;
        const MemPlan p = plan_memory(in), q = plan_memory(f32_in);
        const int64_t G = p.group, slots = p.root_padded + 2 * p.max_padded;
        const int64_t extra = N == 1 ? 0 : 2 * slots + (G > 1 ? 2 * slots / G : 0);
        EXPECT_EQ(p.at(MemDomain::device, MemCat::gathered_grad) - q.at(MemDomain::device, MemCat::gathered_grad),
                  extra);
      }
    }
  }
}

// The plan's geometry is the engine's: Psi from the layout, owned parameters and model-state bytes from
// the engine's shards, gather-slot bytes = root + K x largest other unit (padded).
TEST(MemPlanMeasured, GeometryMatchesLayoutAndEngine) {
  Communicator& w = world();
  const int N = w.world();
  for (ShardStrategy st : strategies(N)) {
    const Shape& sh = kShapes[0];
    RunSpec spec = spec_for(shaped(sh), options(st, OffloadMode::params), {}, sh.B, sh.T, N, 1);
    ShardedRun run(spec, w);
    const MemPlan p = plan_memory(plan_input(spec, sh.B, N));
    const Layout& l = run.model->layout();
    EXPECT_EQ(p.psi, l.total_numel());
    EXPECT_EQ(p.psi, spec.cfg.num_params());
    EXPECT_EQ(p.group, run.engine->shard_group_size());
    int64_t owned = 0, max_padded = 0;
    for (int u = 0; u < run.engine->num_units(); u++) {
      owned += run.engine->shard(u).shard_numel;
      if (u > 0) max_padded = std::max(max_padded, run.engine->shard(u).padded);
    }
    EXPECT_EQ(p.shard_elems, owned);
    EXPECT_EQ(p.model_state_bytes(), run.engine->model_state_bytes());
    EXPECT_EQ(p.root_padded, run.engine->shard(0).padded);
    EXPECT_EQ(p.max_padded, max_padded);
    const int64_t slots = st == ShardStrategy::grad_op ? l.num_units() - 1 : 2;
    EXPECT_EQ(p.at(MemDomain::device, MemCat::gathered_param), 4 * (p.root_padded + slots * max_padded));
  }
}

// Tensor parallelism (2 and 4 ranks, d4's 4 heads): the mesh's runs, T = 2 (x DP 2 at 4 ranks) under every
// strategy and T = 4, with sequence parallelism on and off, the recompute modes, offload params and
// activations: the plan equals the ledger byte for byte. And with sequence parallelism the residual stream
// between blocks is 1/T of what it is without (each rank keeps its N/T rows).
TEST(MemPlanMeasured, TensorParallel) {
  Communicator& w = world();
  const int N = w.world();
  if (N != 2 && N != 4) GTEST_SKIP() << "tensor parallelism of d4 (4 heads) needs 2 or 4 ranks";
  const Shape& sh = kShapes[1];
  const GPTConfig cfg = shaped(sh);
  int cell = 0;
  for (int T : {2, 4}) {
    if (N % T) continue;
    const int dp = N / T;
    for (bool sp : {true, false}) {
      for (ShardStrategy st : strategies(dp)) {
        const int m = cell++ % 4;
        FsdpOptions o = options(st, m == 3 ? OffloadMode::params : OffloadMode::none);
        if (st == ShardStrategy::hybrid) o.shard_group = 1;
        RunSpec spec = spec_for(cfg, o, RecomputePolicy::parse(kRecompute[m]), sh.B, sh.T, dp, 1);
        spec.tp.size = T;
        spec.tp.sequence_parallel = sp;
        spec.offload_activations = m == 2;
        ShardedRun run(spec, w);
        expect_step_matches_plan(run, plan_input(spec, sh.B, N),
                                 str(label(sh, o, spec.recompute, N), " tp=", T, sp ? " sp" : " no-sp",
                                     spec.offload_activations ? " activations" : ""));
      }
    }
    const ActivationPlan on = plan_activations(cfg, {}, sh.B, sh.T, 4, 0, false, TpOptions{T, true});
    const ActivationPlan off = plan_activations(cfg, {}, sh.B, sh.T, 4, 0, false, TpOptions{T, false});
    EXPECT_EQ(on.resid * T, off.resid) << "T=" << T;
  }
}

}  // namespace
}  // namespace gpt::test
