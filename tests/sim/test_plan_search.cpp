// gpt plan's search (src/plan/plan_search.h) against brute force and against its own rules. The top K must
// be the K fastest of the whole feasible space, priced one by one by the simulated step (the search's
// sample prices every feasible candidate it did not rank). Each pruning rule's premise is checked directly
// on the time model: more gather slots, less recompute and fewer offloads are never slower; a wrap the search
// skips is never faster than the one it keeps; the compute bound is below every step. Bad input is one error.
#include <gtest/gtest.h>

#include "src/model/config.h"
#include "src/plan/plan_search.h"
#include "tests/common/error_of.h"

namespace gpt {
using test::error_of;
namespace {

const char* kGpu = R"({"name": "plan test gpu", "kind": "gpu", "dtype": "bf16", "peak_flops": 1e12, "memory_bytes": 8e9,
  "op_overhead_s": 2e-6, "profiles": [{"gemm": [[1e4, 1e10], [1e8, 8e11]], "stream": 1e11}],
  "host": {"bandwidth": 2e10, "pcie": 1e10},
  "network": {"overlap": true, "devices_per_node": 2, "intra": {"bandwidth": 5e10, "latency_s": 5e-6},
              "intra_topology": "nvswitch",
              "inter": {"bandwidth_per_node": 5e9, "latency_s": 2e-5}}})";
const char* kCpu = R"({"name": "plan test cpu", "kind": "cpu", "dtype": "fp32", "peak_flops": 1e11, "cores": 4,
  "profiles": [{"ranks": 4, "threads": 1, "gemm": [[1e4, 2e9], [1e8, 2.5e10]], "stream": 2e10, "copy": 1e10}],
  "host": {"bandwidth": 2e10, "pcie": 1e10},
  "network": {"overlap": false, "devices_per_node": 65536, "intra": {"bandwidth": 5e9, "latency_s": 2e-5},
              "inter": {"bandwidth_per_node": 5e9, "latency_s": 2e-5}}})";

GPTConfig tiny(int L) {
  GPTConfig c;
  c.num_layers = L;
  c.num_heads = 4;
  c.channels = 128;
  c.max_seq_len = 128;
  c.vocab_size = 1000;
  c.finalize();
  return c;
}

PlanRequest request(const HardwareSpec& hw, int L, int world, int seqs_per_rank) {
  PlanRequest rq;
  rq.hw = &hw;
  rq.base.cfg = tiny(L);
  rq.base.world = world;
  rq.base.T = 64;
  rq.base.compute = hw.kind == "gpu" ? DType::BF16 : DType::F32;
  rq.base.attention = AttentionPath::simple;
  rq.total_batch = (int64_t)seqs_per_rank * rq.base.T * world;
  rq.budget.one_ram = hw.kind == "cpu";
  return rq;
}

double step_of(const PlanRequest& rq, const PlanChoice& c) {
  TimeModelInput t;
  t.run = c.apply(rq.base);
  t.grad_accum = c.accum;
  return plan_time(t, *rq.hw).step_s;
}

// The top 3 against every other feasible candidate, and the bound against every priced one.
void expect_exact(const PlanRequest& base) {
  PlanRequest rq = base;
  rq.top = 3;
  rq.sample = 1000000;  // the whole rest of the feasible space, priced
  const PlanResult r = search_plans(rq);
  ASSERT_GE(r.top.size(), 1u);
  EXPECT_EQ((int64_t)(r.top.size() + r.sample.size()), r.stats.space - r.stats.no_fit);
  for (size_t i = 1; i < r.top.size(); i++) EXPECT_LE(r.top[i - 1].time.step_s, r.top[i].time.step_s);
  std::vector<PlanCandidate> all = r.top;
  all.insert(all.end(), r.sample.begin(), r.sample.end());
  int undominated = 0;
  for (const PlanCandidate& c : r.sample) {
    const std::string flags = c.choice.flags(rq.base.T, rq.total_batch);
    EXPECT_GE(c.time.step_s, r.top[0].time.step_s) << flags << " is faster than the plan's first";
    if (c.dominated_by) {  // its dominator, priced too, is no slower
      bool found = false;
      for (const PlanCandidate& d : all)
        if (d.choice == *c.dominated_by) {
          found = true;
          EXPECT_LE(d.time.step_s, c.time.step_s * (1 + 1e-12)) << flags << " is faster than the one dominating it";
        }
      EXPECT_TRUE(found) << flags;
    } else if (r.top.size() == 3) {  // bounded out: no faster than the last of a full top
      EXPECT_GE(c.time.step_s, r.top.back().time.step_s) << flags;
    }
    undominated += !c.dominated_by;
  }
  EXPECT_EQ(undominated + (int)r.top.size(), (int)(r.stats.space - r.stats.no_fit - r.stats.dominated));
  for (const auto* v : {&r.top, &r.sample})
    for (const PlanCandidate& c : *v) EXPECT_LE(c.bound_s, c.time.step_s * (1 + 1e-12));
}

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
  rq.total_batch = 64 * 4 * 4 + 64;  // not whole sequences on every rank
  EXPECT_NE(error_of([&] { search_plans(rq); }).find("--total-batch 1088: must be a positive multiple of T x world"),
            std::string::npos);
  rq = request(hw, 4, 4, 4);
  rq.budget.device = 1 << 20;
  const std::string e = error_of([&] { search_plans(rq); });
  EXPECT_NE(e.find("nothing fits the budget (1.00 MiB device"), std::string::npos) << e;
  EXPECT_NE(e.find("the nearest miss is --shard"), std::string::npos) << e;
  EXPECT_NE(e.find("which needs"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  rq = request(hw, 4, 4, 4);
  rq.pins.B = 3;
  EXPECT_NE(error_of([&] { search_plans(rq); }).find("-B 3: does not divide the 4 sequences"), std::string::npos);
}

}  // namespace
}  // namespace gpt
