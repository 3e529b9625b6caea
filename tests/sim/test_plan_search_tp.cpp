// gpt plan's search over tensor-parallel meshes (src/plan/plan_search.h): the top K are exact where T and
// sequence parallelism are dimensions of the space, a world larger than the global batch in sequences is
// reached through T, pins hold, the joint first is never slower than the best without tensor parallelism, the
// memory of a TP candidate is the closed form's, and each new pruning premise holds on the time model itself.
#include <gtest/gtest.h>
#include <omp.h>

#include "src/cli/plan_report.h"
#include "tests/common/error_of.h"
#include "tests/sim/plan_cases.h"

namespace gpt {
using test::error_of;
using test::expect_exact;
using test::request;
using test::step_of;
using test::time_of;
using test::engine_calls;
using test::tp_seconds;
using test::tp_stretch;
namespace {

// A world of 4 with two sequences a step: one mesh in three (T = 1) cannot give each rank one.
TEST(PlanSearchTp, AWorldLargerThanTheBatchIsReachedThroughTp) {
  const HardwareSpec hw = parse_hardware(test::gpu_file(4), "gpu4.json");
  PlanRequest rq = request(hw, 3, 4, 1);
  rq.total_batch = 2 * rq.base.T;
  const PlanResult r = expect_exact(rq);
  EXPECT_EQ(r.tp_searched, (std::vector<int>{2, 4}));
  for (const PlanCandidate& c : r.top) EXPECT_GE(c.choice.tp.size, 2) << c.choice.flags(64, rq.total_batch);
  // no T reaches it: 8 ranks, a node of 2 (T <= 2: 4 data-parallel ranks for 2 sequences)
  const HardwareSpec two = parse_hardware(test::gpu_file(2), "gpu2.json");
  PlanRequest none = request(two, 3, 8, 1);
  none.total_batch = 2 * none.base.T;
  const std::string e = error_of([&] { search_plans(none); });
  EXPECT_NE(e.find("--total-batch 128: must be a positive multiple of T x world = 64 x 8 = 512, or T x world / tp = "
                   "64 x 8 / 2 = 256 (--tp 2) (every data-parallel rank takes whole sequences)"),
            std::string::npos)
      << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  // a model no T > 1 splits says so
  none.base.cfg.num_heads = 1, none.base.cfg.channels = 64;
  const std::string heads = error_of([&] { search_plans(none); });
  EXPECT_NE(heads.find("no --tp > 1 divides the model's 1 heads"), std::string::npos) << heads;
}

// T in {1, 2, 4} (a node of 4 ranks), SP on and off, every strategy over the data-parallel ranks: exact, on a
// budget the unconstrained first does not fit.
TEST(PlanSearchTp, TopThreeAreTheFastestOfTheJointSpace) {
  const HardwareSpec hw = parse_hardware(test::gpu_file(4), "gpu4.json");
  PlanRequest rq = request(hw, 3, 4, 2);
  EXPECT_EQ(search_plans(rq).tp_searched, (std::vector<int>{1, 2, 4}));
  rq.budget.margin = 0, rq.budget.margin_bytes = 0;
  rq.budget.device = search_plans(rq).top[0].device_need * 9 / 10;
  const PlanResult r = expect_exact(rq);
  bool sp_on = false, sp_off = false;  // both were in the space priced
  for (const PlanCandidate& c : r.sample) {
    sp_on = sp_on || c.choice.tp.sequence_parallel;
    sp_off = sp_off || (c.choice.tp.size > 1 && !c.choice.tp.sequence_parallel);
  }
  EXPECT_TRUE(sp_on && sp_off);
}

// Rule 5 prunes where the engine's traffic outweighs the compute: wide blocks over a slow network, 8
// micro-steps at B = 1.
TEST(PlanSearchTp, TheChannelBoundPrunesAndTheTopStaysExact) {
  const HardwareSpec hw = parse_hardware(test::gpu_file(2), "gpu2.json");
  PlanRequest rq = request(hw, 2, 8, 8);
  rq.base.cfg.channels = 512;
  const PlanResult r = expect_exact(rq);
  EXPECT_GT(r.stats.bounded_by_channel, 0);
}

// The search's threads (price batches, the floors a batch waits for, each micro-batch's bound and each mesh's
// enumeration) change nothing it prices or reports: the same report on 1, 2 and 3 threads, the search's own
// wall time aside. Two cases: rule 5 cutting on a gpu file, and on a cpu file a search whose floors follow the
// batches (a batch's size set by the threads prices, and measures, more there).
void expect_the_same_on_any_threads(const PlanRequest& rq, const std::string& label) {
  const int threads = omp_get_max_threads();
  std::string first;
  for (int n : {1, 2, 3}) {
    omp_set_num_threads(n);
    PlanResult r = search_plans(rq);
    EXPECT_GT(r.stats.priced, 32) << label << ": more than one batch";
    EXPECT_GT(r.stats.bound_sims, 0) << label;
    r.stats.search_s = 0;
    const std::string report = plan_json(rq, r, "tiny");
    if (n == 1)
      first = report;
    else
      EXPECT_EQ(report, first) << label << ": " << n << " threads";
  }
  omp_set_num_threads(threads);
}

TEST(PlanSearchTp, ThreadsChangeNothingPricedOrReported) {
  const HardwareSpec gpu = parse_hardware(test::gpu_file(2), "gpu2.json");
  PlanRequest rq = request(gpu, 2, 8, 8);
  rq.base.cfg.channels = 512;
  rq.top = 5;
  expect_the_same_on_any_threads(rq, "gpu file, rule 5 cutting");
  const HardwareSpec cpu = parse_hardware(test::kCpu, "cpu.json");
  PlanRequest small = request(cpu, 4, 4, 8);
  small.top = 1;
  expect_the_same_on_any_threads(small, "cpu file, top 1");
}

TEST(PlanSearchTp, PinsHoldAndAreCheckedAsARunWouldBe) {
  const HardwareSpec hw = parse_hardware(test::gpu_file(4), "gpu4.json");
  PlanRequest rq = request(hw, 4, 8, 2);
  rq.pins.tp = 2;
  for (const PlanCandidate& c : search_plans(rq).top) EXPECT_EQ(c.choice.tp.size, 2);
  rq.pins.sequence_parallel = false;
  for (const PlanCandidate& c : search_plans(rq).top) EXPECT_EQ(c.choice.tp, (TpOptions{2, false}));
  rq.pins.tp.reset();  // SP off: T = 1 or T > 1 without it
  for (const PlanCandidate& c : search_plans(rq).top) EXPECT_FALSE(c.choice.tp.sequence_parallel);
  rq.pins.sequence_parallel = true;  // SP on: T > 1 only
  for (const PlanCandidate& c : search_plans(rq).top) EXPECT_TRUE(c.choice.tp.size > 1 && c.choice.tp.sequence_parallel);
  rq.pins = PlanPins{};
  rq.pins.tp = 3;
  EXPECT_NE(error_of([&] { search_plans(rq); }).find("--tp 3 must divide --world 8"), std::string::npos);
  rq.base.world = 12, rq.total_batch = 12 * 2 * 64;
  EXPECT_NE(error_of([&] { search_plans(rq); }).find("--tp 3 must divide the model's 4 heads"), std::string::npos);
  rq = request(hw, 4, 8, 2);
  rq.pins.tp = 1, rq.pins.sequence_parallel = true;
  EXPECT_NE(error_of([&] { search_plans(rq); }).find("--sequence-parallel on needs --tp > 1"), std::string::npos);
}

// The space without tensor parallelism is a subset of the joint one.
TEST(PlanSearchTp, TheJointFirstIsNeverSlowerThanTheBestWithoutTp) {
  for (int dpn : {2, 4}) {
    const HardwareSpec hw = parse_hardware(test::gpu_file(dpn), "gpu.json");
    for (int seqs : {1, 4}) {
      PlanRequest rq = request(hw, 4, 8, seqs);
      const PlanResult joint = search_plans(rq);
      rq.pins.tp = 1;
      const PlanResult one = search_plans(rq);
      EXPECT_LE(joint.top[0].time.step_s, one.top[0].time.step_s) << dpn << " " << seqs;
    }
  }
}

// The memory the search holds a TP candidate to is the closed form's (memory_from_geometry), and its two halves
// (the engine's, over the data-parallel ranks of the mesh, and the step's) sum to it.
TEST(PlanSearchTp, ATpCandidatesMemoryIsTheClosedForms) {
  const HardwareSpec hw = parse_hardware(test::gpu_file(4), "gpu4.json");
  PlanRequest rq = request(hw, 4, 8, 1);
  rq.pins.tp = 4;
  rq.top = 5;
  for (const PlanCandidate& c : search_plans(rq).top) {
    const MemPlan m = memory_from_geometry(c.choice.apply(rq.base));
    int64_t device = 0, host = 0;
    plan_need(MemTotals{m.device_peak, m.host_peak}, rq.budget, &device, &host);
    EXPECT_EQ(c.device_need, device) << c.choice.flags(64, rq.total_batch);
    EXPECT_EQ(c.host_need, host) << c.choice.flags(64, rq.total_batch);
  }
  for (bool sp : {true, false})
    for (const char* off : {"none", "optimizer,activations", "params"})
      for (const char* rc : {"none", "selective", "full"}) {
        PlanChoice c;
        c.tp = TpOptions{2, sp};
        c.offload = OffloadSet::parse(off);
        c.recompute = RecomputePolicy::parse(rc);
        c.wrap = WrapPolicy::parse("blocks:3");
        c.B = 2;
        const MemPlanInput in = c.apply(rq.base);
        const MemPlan m = memory_from_geometry(in);
        const MemTotals e = engine_memory(in, unit_numels(in)), s = step_memory(in);
        EXPECT_EQ(e.device + s.device, m.device_peak) << sp << off << rc;
        EXPECT_EQ(e.host + s.host, m.host_peak) << sp << off << rc;
        EXPECT_EQ(m.device_peak, plan_memory(in).device_peak) << sp << off << rc;  // and the ledger's
      }
}

// Rule 0 at one data-parallel rank under TP: strategy and slots change no op or byte; the wrap does (the
// gradient norm's segments per unit, SP's replicated-gradient all-reduces), so it is searched.
TEST(PlanSearchTp, OneDataParallelRankKeepsOneCandidatePerProgram) {
  const HardwareSpec hw = parse_hardware(test::gpu_file(2), "gpu2.json");
  PlanRequest rq = request(hw, 4, 2, 2);
  rq.pins.tp = 2;
  for (bool sp : {false, true}) {
    PlanChoice kept;
    kept.tp = TpOptions{2, sp};
    kept.B = 2, kept.accum = 2, kept.gather_slots = 1;
    const TimePlan t = time_of(rq, kept);
    const int64_t peak = memory_from_geometry(kept.apply(rq.base)).device_peak;
    for (const char* strategy : {"full", "none"})
      for (int k : {1, 2, 3}) {
        PlanChoice same = kept;
        same.strategy = FsdpOptions::parse_strategy(strategy);
        same.gather_slots = k;
        EXPECT_NEAR(step_of(rq, same), t.step_s, t.step_s * 1e-12) << sp << strategy << k;
        EXPECT_EQ(memory_from_geometry(same.apply(rq.base)).device_peak, peak) << sp << strategy << k;
      }
    PlanChoice coarser = kept;
    coarser.wrap = WrapPolicy::parse("blocks:4");
    EXPECT_NE(step_of(rq, coarser), t.step_s) << sp;  // why the wrap is searched
  }
  rq.top = 1000;
  bool other_wrap = false;
  for (const PlanCandidate& c : search_plans(rq).top) other_wrap = other_wrap || !(c.choice.wrap == WrapPolicy{});
  EXPECT_TRUE(other_wrap);
}

// Why rule 1 does not hold under TP: blocks:5 of 12 layers has blocks:4's units (3), larger, and is the faster
// here (its larger gathers sit elsewhere among the group's collectives on the one channel), so every K is
// searched there.
TEST(PlanSearchTp, UnderTpEveryWrapIsSearched) {
  const HardwareSpec hw = parse_hardware(test::gpu_file(2), "gpu2.json");
  PlanRequest rq = request(hw, 12, 4, 2);
  PlanChoice kept, skipped;
  kept.tp = skipped.tp = TpOptions{2, true};
  kept.wrap = WrapPolicy::parse("blocks:4");
  skipped.wrap = WrapPolicy::parse("blocks:5");
  EXPECT_LT(step_of(rq, skipped), step_of(rq, kept));
  const PlanSpace s = make_plan_space(rq);
  ASSERT_EQ(s.meshes.size(), 2u);
  EXPECT_EQ(s.meshes[0].wraps.size(), 6u);   // T = 1: K in {1, 2, 3, 4, 6, 12}
  EXPECT_EQ(s.meshes[1].wraps.size(), 12u);  // T = 2: every K
  EXPECT_EQ(s.coarsest_wrap.str(), "blocks:12");
}

// Rule 5's premises on the time model: the engine's collectives (a step's collectives less the group's) do not
// depend on recompute, SP, B, the offloads or the gather slots; they are least at the coarsest wrap; and every
// micro-step but the last adds the same seconds.
TEST(PlanSearchTp, TheEnginesCollectivesFollowRuleFivesPremises) {
  const HardwareSpec hw = parse_hardware(test::gpu_file(2), "gpu2.json");
  PlanRequest rq = request(hw, 4, 8, 4);
  auto engine_s = [&](const PlanChoice& c) { return time_of(rq, c).comm_s - tp_seconds(rq, c); };
  for (int T : {1, 2})
    for (const char* strategy : {"full", "grad_op", "none", "hybrid"})
      for (bool ns : {false, true}) {
        PlanChoice c;
        c.tp = TpOptions{T, T > 1};
        c.strategy = FsdpOptions::parse_strategy(strategy);
        c.shard_group = c.strategy == ShardStrategy::hybrid ? 2 : 0;
        c.no_sync = ns;
        c.B = 1, c.accum = 2;
        const std::string what = str(T, " ", strategy, " ", ns);
        const double base = engine_s(c);
        const int64_t base_calls = engine_calls(time_of(rq, c));
        EXPECT_GT(base_calls, 0) << what;
        for (const char* rc : {"selective", "full"}) {
          PlanChoice v = c;
          v.recompute = RecomputePolicy::parse(rc);
          EXPECT_NEAR(engine_s(v), base, 1e-9 * base) << what << " " << rc;
          EXPECT_EQ(engine_calls(time_of(rq, v)), base_calls) << what << " " << rc;
        }
        for (const char* off : {"activations", "optimizer", "params"}) {
          PlanChoice v = c;
          v.offload = OffloadSet::parse(off);
          EXPECT_NEAR(engine_s(v), base, 1e-9 * base) << what << " " << off;
          EXPECT_EQ(engine_calls(time_of(rq, v)), base_calls) << what << " " << off;
        }
        PlanChoice v = c;
        v.gather_slots = 3, v.B = 2, v.tp.sequence_parallel = false;
        EXPECT_NEAR(engine_s(v), base, 1e-9 * base) << what << " slots, B, SP";
        EXPECT_EQ(engine_calls(time_of(rq, v)), base_calls) << what << " slots, B, SP";
        for (const char* wrap : {"block", "blocks:2", "blocks:3"}) {  // blocks:4: the coarsest of 4 layers
          PlanChoice w = c, coarsest = c;
          w.wrap = WrapPolicy::parse(wrap);
          coarsest.wrap = WrapPolicy::parse("blocks:4");
          EXPECT_LE(engine_s(coarsest), engine_s(w) * (1 + 1e-12)) << what << " " << wrap;
        }
        PlanChoice one = c, two = c;
        one.accum = 1, two.accum = 2;
        const double last = engine_s(one), each = engine_s(two) - last;
        const int64_t last_calls = engine_calls(time_of(rq, one)),
                      each_calls = engine_calls(time_of(rq, two)) - last_calls;
        for (int a : {3, 4}) {
          PlanChoice m = c;
          m.accum = a;
          EXPECT_NEAR(engine_s(m), last + (a - 1) * each, 1e-9 * engine_s(m)) << what << " x" << a;
          EXPECT_EQ(engine_calls(time_of(rq, m)), last_calls + (a - 1) * each_calls) << what << " x" << a;
        }
      }
}

// Rule 5 with one gather slot: nothing is prefetched, so each of the engine's all-gathers idles the compute
// stream for its whole length, as the group's collectives do. On the time model: a one-slot step lasts at least
// its compute, the group's seconds and its own all-gathers' (SP off: the engine's only), whatever the strategy,
// recompute, offload and accumulation; the all-gathers are no fewer seconds than the coarsest wrap's; and where
// the gathers are long against the compute (wide blocks over a slow network), the bound passes rule 5's own.
TEST(PlanSearchTp, WithOneGatherSlotTheEnginesGathersIdleTheCompute) {
  const HardwareSpec hw = parse_hardware(test::gpu_file(2), "gpu2.json");
  PlanRequest rq = request(hw, 4, 8, 4);
  rq.base.cfg.channels = 512;
  int passed_rule_five = 0;
  for (int T : {1, 2})
    for (const char* strategy : {"full", "grad_op", "hybrid"})
      for (const char* levers : {"none", "full", "params", "activations"}) {
        PlanChoice c;
        c.tp = TpOptions{T, false};
        c.strategy = FsdpOptions::parse_strategy(strategy);
        c.shard_group = c.strategy == ShardStrategy::hybrid ? 2 : 0;
        c.gather_slots = 1, c.B = 1, c.accum = 2;
        if (std::string(levers) == "full") c.recompute = RecomputePolicy::parse("full");
        if (std::string(levers) == "params" || std::string(levers) == "activations")
          c.offload = OffloadSet::parse(levers);
        const std::string what = str(T, " ", strategy, " ", levers);
        const TimePlan p = time_of(rq, c);
        const double tp = tp_seconds(rq, c);
        EXPECT_GT(p.gather_s, 0) << what;
        EXPECT_GE(p.step_s * (1 + 1e-12), p.compute_s + tp + p.gather_s) << what;
        PlanChoice coarsest = c;
        coarsest.wrap = WrapPolicy::parse("blocks:4");
        EXPECT_LE(time_of(rq, coarsest).gather_s, p.gather_s * (1 + 1e-12)) << what;
        passed_rule_five += p.gather_s > std::max(0.0, p.comm_s - tp - p.compute_s);  // beyond max(compute, comm)
      }
  EXPECT_GT(passed_rule_five, 0);
}

// Rule 5's stretch term under TP: each of the group's collectives is issued and waited at once, so any collective
// the channel runs before it holds the compute stream at that wait; during one of the engine's n collectives the
// compute stream runs at most the rest of one stretch between two such waits. On the time model: a step lasts
// at least its compute + the group's seconds + (the engine's seconds - n x the stretch of its micro-step on one
// data-parallel rank), at every strategy, gather slots, recompute, offload, SP and accumulation; the step's own
// stretches (it has the group's waits and may have more) are no longer; and where the gathers are long against
// the compute, the term passes rule 5's others.
TEST(PlanSearchTp, DuringEachEngineCollectiveTheComputeRunsAtMostOneStretch) {
  const HardwareSpec hw = parse_hardware(test::gpu_file(2), "gpu2.json");
  PlanRequest rq = request(hw, 4, 8, 4);
  rq.base.cfg.channels = 512;
  const WrapPolicy coarsest = WrapPolicy::parse("blocks:4");
  int passed_rule_five = 0, cases = 0;
  for (const char* strategy : {"full", "grad_op", "none", "hybrid"})
    for (int slots : {1, 2, 3})
      for (const char* levers : {"none", "selective", "full", "activations", "params", "sp", "x2"}) {
        PlanChoice c;
        c.tp = TpOptions{2, std::string(levers) == "sp"};
        c.strategy = FsdpOptions::parse_strategy(strategy);
        c.shard_group = c.strategy == ShardStrategy::hybrid ? 2 : 0;
        c.gather_slots = slots, c.B = 1, c.accum = std::string(levers) == "x2" ? 2 : 1;
        c.wrap = WrapPolicy::parse(slots == 2 ? "blocks:2" : "block");
        if (std::string(levers) == "selective" || std::string(levers) == "full")
          c.recompute = RecomputePolicy::parse(levers);
        if (std::string(levers) == "params" || std::string(levers) == "activations")
          c.offload = OffloadSet::parse(levers);
        const std::string what = str(strategy, " slots ", slots, " ", levers);
        const TimePlan p = time_of(rq, c);
        const double tp = tp_seconds(rq, c), stretch = tp_stretch(rq, c, coarsest);
        const double engine = p.comm_s - tp;
        const int64_t n = engine_calls(p);
        ASSERT_GT(stretch, 0) << what;
        EXPECT_LT(stretch, p.compute_s / c.accum) << what << ": the group's waits split the compute";
        EXPECT_LE(p.longest_stretch_s, stretch * (1 + 1e-12)) << what;
        const double term = std::max(0.0, engine - n * stretch);
        EXPECT_GE(p.step_s * (1 + 1e-12), p.compute_s + tp + term) << what;
        passed_rule_five += term > std::max(p.compute_s, engine) - p.compute_s &&
                            (slots > 1 || term > p.gather_s);
        cases++;
      }
  EXPECT_EQ(cases, 84);
  EXPECT_GT(passed_rule_five, 0);
}

}  // namespace
}  // namespace gpt
