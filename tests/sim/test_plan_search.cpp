// gpt plan's search (src/plan/plan_search.h) against brute force and against its own rules. The top K must
// be the K fastest of the whole feasible space, priced one by one by the simulated step (the search's
// sample prices every feasible candidate it did not rank). Each pruning rule's premise is checked directly
// on the time model: more gather slots, less recompute and fewer offloads are never slower; a wrap the search
// skips is never faster than the one it keeps; the compute bound is below every step. Bad input is one error.
#include <gtest/gtest.h>

#include "tests/common/error_of.h"
#include "tests/sim/plan_cases.h"

namespace gpt {
using test::error_of;
using test::expect_exact;
using test::request;
using test::step_of;
using test::tiny;
namespace {

const std::string kGpu = test::gpu_file(2);
const char* kCpu = test::kCpu;

TEST(PlanSearch, TopThreeAreTheFastestOfTheFeasibleSpaceOnAGpuFile) {
  const HardwareSpec hw = parse_hardware(kGpu, "gpu.json");
  PlanRequest rq = request(hw, 4, 4, 4);
  rq.budget.margin = 0, rq.budget.margin_bytes = 0;
  rq.budget.device = search_plans(rq).top[0].device_need * 7 / 10;  // the unconstrained first does not fit
  expect_exact(rq);
}

TEST(PlanSearch, TopThreeAreTheFastestOfTheFeasibleSpaceOnACpuFile) {
  const HardwareSpec hw = parse_hardware(kCpu, "cpu.json");
  expect_exact(request(hw, 3, 4, 4));
}

TEST(PlanSearch, TheEngineAndStepHalvesSumToTheClosedForm) {
  for (const char* off : {"none", "optimizer,activations", "params"})
    for (const char* rc : {"none", "selective", "full"}) {
      MemPlanInput in;
      in.cfg = tiny(4);
      in.world = 4;
      in.T = 64;
      in.B = 2;
      in.compute = DType::BF16;
      const OffloadSet o = OffloadSet::parse(off);
      in.fsdp.offload = o.states;
      in.offload_activations = o.activations;
      in.recompute = RecomputePolicy::parse(rc);
      in.wrap = WrapPolicy::parse("blocks:3");
      const MemPlan m = memory_from_geometry(in);
      const MemTotals e = engine_memory(in), s = step_memory(in);
      EXPECT_EQ(e.device + s.device, m.device_peak) << off << " " << rc;
      EXPECT_EQ(e.host + s.host, m.host_peak) << off << " " << rc;
    }
}

// The premises of the dominance rule, on the time model itself, at 2 and 4 ranks of the gpu file.
TEST(PlanSearch, MoreSlotsLessRecomputeAndFewerOffloadsAreNeverSlower) {
  const HardwareSpec hw = parse_hardware(kGpu, "gpu.json");
  for (int world : {2, 4})
    for (ShardStrategy s : {ShardStrategy::full, ShardStrategy::grad_op, ShardStrategy::none}) {
      PlanRequest rq = request(hw, 6, world, 2);
      PlanChoice c;
      c.strategy = s;
      c.B = 1, c.accum = 2;
      double prev = 1e30;
      for (int k : {1, 2, 3}) {
        c.gather_slots = k;
        const double t = step_of(rq, c);
        EXPECT_LE(t, prev * (1 + 1e-12)) << "slots " << k << " at " << world;
        prev = t;
      }
      prev = 0;
      for (const char* r : {"none", "every:4", "every:2", "full"}) {
        c.recompute = RecomputePolicy::parse(r);
        const double t = step_of(rq, c);
        EXPECT_GE(t, prev * (1 - 1e-12)) << r;
        prev = t;
      }
      prev = 0;
      for (const char* o : {"none", "optimizer", "params", "params,activations"}) {
        c.offload = OffloadSet::parse(o);
        const double t = step_of(rq, c);
        EXPECT_GE(t, prev * (1 - 1e-12)) << o;
        prev = t;
      }
    }
}

// The same program: at one rank with the states on the device, the strategy (none or full), the wrap and the
// gather slots change no op of the step, so the search keeps one of each such family. Its premise on the time
// model and the memory plan: every member plans the same memory, and prices the same step up to the order its
// seconds are summed in (1e-12 of it). And the plan's top are
// distinct programs: no two share recompute, offload and micro-batch.
TEST(PlanSearch, OneRankOnTheDeviceKeepsOneCandidatePerProgram) {
  const HardwareSpec hw = parse_hardware(kCpu, "cpu.json");
  PlanRequest rq = request(hw, 4, 1, 4);
  rq.top = 3;
  rq.sample = 1000000;
  const PlanResult r = search_plans(rq);
  std::vector<PlanCandidate> all = r.top;
  all.insert(all.end(), r.sample.begin(), r.sample.end());
  for (size_t i = 0; i < all.size(); i++) {
    EXPECT_EQ(all[i].choice.strategy, ShardStrategy::full);
    EXPECT_EQ(all[i].choice.wrap.str(), "block");
    EXPECT_EQ(all[i].choice.gather_slots, 1);
    for (size_t j = 0; j < i; j++)
      EXPECT_FALSE(all[j].choice.recompute.str() == all[i].choice.recompute.str() &&
                   all[j].choice.B == all[i].choice.B && all[j].choice.offload.str() == all[i].choice.offload.str())
          << all[i].choice.flags(rq.base.T, rq.total_batch);
  }
  PlanChoice kept;
  kept.B = 2, kept.accum = 2, kept.gather_slots = 1;
  const double t = step_of(rq, kept);
  const int64_t peak = memory_from_geometry(kept.apply(rq.base)).device_peak;
  for (const char* strategy : {"full", "none"})
    for (const char* wrap : {"block", "blocks:2", "blocks:4"})
      for (int k : {1, 2, 3}) {
        PlanChoice same = kept;
        same.strategy = FsdpOptions::parse_strategy(strategy);
        same.wrap = WrapPolicy::parse(wrap);
        same.gather_slots = k;
        EXPECT_NEAR(step_of(rq, same), t, t * 1e-12) << strategy << " " << wrap << " " << k;
        EXPECT_EQ(memory_from_geometry(same.apply(rq.base)).device_peak, peak) << strategy << " " << wrap << " " << k;
      }
}

// Rule 1: at L = 12, blocks:5 has the units of blocks:4 (3 of them) with larger slots.
TEST(PlanSearch, ASkippedWrapIsNoFasterThanTheOneKept) {
  const HardwareSpec hw = parse_hardware(kGpu, "gpu.json");
  PlanRequest rq = request(hw, 12, 4, 2);
  PlanChoice kept, skipped;
  kept.wrap = WrapPolicy::parse("blocks:4");
  skipped.wrap = WrapPolicy::parse("blocks:5");
  EXPECT_LE(step_of(rq, kept), step_of(rq, skipped) * (1 + 1e-12));
  EXPECT_LT(memory_from_geometry(kept.apply(rq.base)).device_peak, memory_from_geometry(skipped.apply(rq.base)).device_peak);
}

TEST(PlanSearch, PinsAndTheBudgetHold) {
  const HardwareSpec hw = parse_hardware(kGpu, "gpu.json");
  PlanRequest rq = request(hw, 4, 4, 4);
  rq.pins.strategy = ShardStrategy::hybrid;
  rq.pins.shard_group = 2;
  rq.pins.recompute = RecomputePolicy::parse("full");
  rq.pins.B = 2;
  for (const PlanCandidate& c : search_plans(rq).top) {
    EXPECT_EQ(c.choice.strategy, ShardStrategy::hybrid);
    EXPECT_EQ(c.choice.shard_group, 2);
    EXPECT_EQ(c.choice.recompute.str(), "full");
    EXPECT_EQ(c.choice.B, 2);
    EXPECT_EQ(c.choice.accum, 2);
  }
  // A budget below what the unconstrained first needs: the first changes and fits.
  PlanRequest free = request(hw, 4, 4, 4);
  const PlanCandidate best = search_plans(free).top[0];
  free.budget.device = best.device_need - 1;
  const PlanResult tight = search_plans(free);
  EXPECT_FALSE(tight.top[0].choice == best.choice);
  for (const PlanCandidate& c : tight.top) EXPECT_LE(c.device_need, free.budget.device);
  EXPECT_GE(tight.top[0].time.step_s, best.time.step_s);
}

TEST(PlanSearch, BadInputIsOneError) {
  const HardwareSpec hw = parse_hardware(kGpu, "gpu.json");
  PlanRequest rq = request(hw, 4, 4, 4);
  rq.total_batch = 64 * 4 * 4 + 64;  // 17 sequences: whole ones on no mesh's data-parallel ranks (4 or 2)
  const std::string batch = error_of([&] { search_plans(rq); });
  EXPECT_NE(batch.find("--total-batch 1088: must be a positive multiple of T x world = 64 x 4 = 256, or T x world / "
                       "tp = 64 x 4 / 2 = 128 (--tp 2)"),
            std::string::npos)
      << batch;
  rq = request(hw, 4, 4, 4);
  rq.budget.device = 1 << 20;
  const std::string e = error_of([&] { search_plans(rq); });
  EXPECT_NE(e.find("nothing fits the budget (1.00 MiB device"), std::string::npos) << e;
  EXPECT_NE(e.find("the nearest miss is --tp 2"), std::string::npos) << e;  // half the weights per rank
  EXPECT_NE(e.find("which needs"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  rq = request(hw, 4, 4, 4);
  rq.pins.B = 3;
  const std::string B = error_of([&] { search_plans(rq); });
  EXPECT_NE(B.find("-B 3: does not divide the sequences each data-parallel rank takes per step in any mesh: 4 (--tp 1), "
                   "8 (--tp 2)"),
            std::string::npos)
      << B;
  rq.pins.tp = 1;  // one mesh: its own message
  EXPECT_NE(error_of([&] { search_plans(rq); }).find("-B 3: does not divide the 4 sequences"), std::string::npos);
}

}  // namespace
}  // namespace gpt
