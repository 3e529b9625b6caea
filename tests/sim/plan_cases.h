// The cases gpt plan's search is tested on (test_plan_search.cpp, test_plan_search_tp.cpp): two small hardware
// files, a small model, and the brute-force check that the search's top K are the K fastest of the whole
// feasible space, with each bound below every step it bounds.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "src/model/config.h"
#include "src/plan/plan_bounds.h"
#include "src/plan/plan_search.h"
#include "src/plan/plan_space.h"

namespace gpt::test {

// devices_per_node: the tensor-parallel sizes a gpu file admits (T <= it).
inline std::string gpu_file(int devices_per_node) {
  return R"({"name": "plan test gpu", "kind": "gpu", "dtype": "bf16", "peak_flops": 1e12, "memory_bytes": 8e9,
  "op_overhead_s": 2e-6, "profiles": [{"gemm": [[1e4, 1e10], [1e8, 8e11]], "stream": 1e11}],
  "host": {"bandwidth": 2e10, "pcie": 1e10},
  "network": {"overlap": true, "devices_per_node": )" +
         std::to_string(devices_per_node) + R"(, "intra": {"bandwidth": 5e10, "latency_s": 5e-6},
              "intra_topology": "nvswitch", "inter": {"bandwidth_per_node": 5e9, "latency_s": 2e-5}}})";
}
inline const char* kCpu = R"({"name": "plan test cpu", "kind": "cpu", "dtype": "fp32", "peak_flops": 1e11, "cores": 4,
  "profiles": [{"ranks": 4, "threads": 1, "gemm": [[1e4, 2e9], [1e8, 2.5e10]], "stream": 2e10, "copy": 1e10}],
  "host": {"bandwidth": 2e10, "pcie": 1e10},
  "network": {"overlap": false, "devices_per_node": 65536, "intra": {"bandwidth": 5e9, "latency_s": 2e-5},
              "inter": {"bandwidth_per_node": 5e9, "latency_s": 2e-5}}})";

inline GPTConfig tiny(int L) {
  GPTConfig c;
  c.num_layers = L;
  c.num_heads = 4;
  c.channels = 128;
  c.max_seq_len = 128;
  c.vocab_size = 1000;
  c.finalize();
  return c;
}

// L layers on `world` ranks, a global batch of seqs_per_rank x world sequences of 64 tokens.
inline PlanRequest request(const HardwareSpec& hw, int L, int world, int seqs_per_rank) {
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

inline TimePlan time_of(const PlanRequest& rq, const PlanChoice& c) {
  TimeModelInput t;
  t.run = c.apply(rq.base);
  t.grad_accum = c.accum;
  t.ranks_per_node = rq.ranks_per_node;
  return plan_time(t, *rq.hw);
}
inline double step_of(const PlanRequest& rq, const PlanChoice& c) { return time_of(rq, c).step_s; }

// The tensor-parallel group's seconds in c's step: its micro-step on the mesh's one data-parallel rank, where
// the engine's groups have one rank, times the micro-steps.
inline double tp_seconds(const PlanRequest& rq, PlanChoice c) {
  if (c.tp.size == 1) return 0;
  const int accum = c.accum;
  c.strategy = ShardStrategy::full, c.shard_group = 0, c.accum = 1, c.no_sync = false;
  PlanRequest one = rq;
  one.base.world = c.tp.size;
  one.ranks_per_node = c.tp.size;
  return accum * time_of(one, c).comm_s;
}

// Rule 5's stretch under TP: the most compute c's compute stream runs between two of the group's waits, from
// the same micro-step on the mesh's one data-parallel rank at the coarsest wrap (as PlanBounds::of_key).
inline double tp_stretch(const PlanRequest& rq, PlanChoice c, const WrapPolicy& coarsest) {
  c.strategy = ShardStrategy::full, c.shard_group = 0, c.accum = 1, c.no_sync = false, c.gather_slots = 1;
  c.offload = OffloadSet{}, c.wrap = coarsest;
  PlanRequest one = rq;
  one.base.world = c.tp.size;
  one.ranks_per_node = c.tp.size;
  return time_of(one, c).longest_stretch_s;
}

// The engine's collectives that take time in c's step: every group's less the tensor-parallel group's.
inline int64_t engine_calls(const TimePlan& p) {
  int64_t n = p.timed_calls;
  for (int64_t t : p.tp_calls) n -= t;
  return n;
}

// The top 3 against every other feasible candidate, and each bound against every priced step.
inline PlanResult expect_exact(const PlanRequest& base) {
  PlanRequest rq = base;
  rq.top = 3;
  rq.sample = 1000000;  // the whole rest of the feasible space, priced
  const PlanResult r = search_plans(rq);
  EXPECT_GE(r.top.size(), 1u);
  if (r.top.empty()) return r;
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
          EXPECT_LE(d.time.step_s, c.time.step_s * (1 + 1e-12))
              << flags << " is faster than the one dominating it, " << d.choice.flags(rq.base.T, rq.total_batch);
        }
      EXPECT_TRUE(found) << flags;
    } else if (r.top.size() == 3) {  // bounded out: no faster than the last of a full top
      EXPECT_GE(c.time.step_s, r.top.back().time.step_s) << flags;
    }
    undominated += !c.dominated_by;
  }
  EXPECT_EQ(undominated + (int)r.top.size(), (int)(r.stats.space - r.stats.no_fit - r.stats.dominated));
  // rule 4: the compute of one micro-step times the micro-steps is the candidate's own; the group's collectives
  // counted are at most what it waits for; rule 5's bound is below its step
  PlanStats stats;
  const PlanSpace space = make_plan_space(rq);
  PlanBounds bounds(rq, space, stats);
  for (const PlanCandidate& c : all) {
    const std::string flags = c.choice.flags(rq.base.T, rq.total_batch);
    EXPECT_LE(c.bound_s, c.time.step_s * (1 + 1e-12)) << flags;
    EXPECT_NEAR(c.bound.compute, c.time.compute_s, 1e-9 * c.time.compute_s) << flags;
    EXPECT_LE(c.bound.tp, c.time.exposed_comm_s * (1 + 1e-12)) << flags;
    EXPECT_LE(bounds.channel(c), c.time.step_s) << flags;
    // Rule 5 tries the coarsest wrap's floor for every wrap: it must be no larger than the wrap's own (-1: not known).
    const double own_floor = bounds.engine_floor(c.choice, c.choice.wrap);
    if (own_floor >= 0) {
      EXPECT_LE(bounds.engine_floor(c.choice, space.coarsest_wrap), own_floor * (1 + 1e-12)) << flags;
    }
  }
  return r;
}

}  // namespace gpt::test
