// The search behind `gpt plan` and `--plan auto`: the fastest configurations of one model on one machine
// that fit a per-rank memory budget, found without running anything. Every candidate is judged by the two
// planners that run the real model and engine on the simulated machine: memory by the engine's geometry
// and the activation plan (memplan.h, equal byte for byte to the ledger), time by one simulated step
// (timemodel.h). Nothing here restates the schedule.
//
// The space: strategy (full, grad_op, none, hybrid with every shard group G that divides the world, 1 < G < N)
// x recompute (none, selective, every:4, every:2, full) x offload (none, optimizer, params, each with and
// without activations; on a cpu hardware file none only) x wrap (blocks:K) x gather slots (1, 2, 3) x
// micro-batch B (every divisor of the sequences each rank takes per step; accumulation makes up the rest) x
// reduce dtype (fp32, bf16) x no-sync (with accumulation). One rank: strategy full, fp32, no no-sync. Pins
// (plan_choice.h) fix any of them.
//
// Pruning, exact under the time model's structure, never by sampling:
//  0. the same program: one rank with the states on the device gathers and reduces nothing (resident
//     parameters, direct gradients), so strategy none, the wrap and the gather slots change no op of its step:
//     only full, the first wrap and the first slot count are searched there.
//  1. wraps: blocks:K is searched only for K = ceil(L/u), u = 1..L. Any other K has as many units as the
//     next smaller such K' = ceil(L/ceil(L/K)) or more, and larger gather slots: K' is at least as fast and
//     never larger. min-params:N groups the same equal blocks as some blocks:K.
//  2. memory: a candidate whose predicted peak (with the pre-flight margin) exceeds the budget is dropped.
//  3. dominance: for the same strategy, wrap, slots, B, reduce dtype and no-sync, a fitting (recompute r,
//     offload o) is dropped when another fitting (r', o') recomputes no more (its compute time is no larger)
//     and offloads a subset of o: offloading and recomputing add work and save only memory. On a cpu file
//     offload is not searched at all: device and host are the same RAM, so it saves nothing.
//  4. bound: the compute time of (recompute, B), one simulated step each, is a lower bound on the step of
//     every candidate that shares it. Candidates are priced in the order of that bound, and the search stops
//     when the bound reaches the K-th best step found (branch and bound: the top K are exact).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "src/plan/hardware.h"
#include "src/plan/plan_choice.h"
#include "src/plan/timemodel.h"

namespace gpt {

struct PlanBudget {
  int64_t device = -1;  // bytes per rank (-1: no limit)
  int64_t host = -1;    // bytes per rank (-1: no limit)
  // cpu hardware: device and host are one RAM, so their sum is held against `device`
  bool one_ram = false;
  double margin = 0.05;                       // as pre-flight (preflight.h): a fraction of each need
  int64_t margin_bytes = int64_t{256} << 20;  // and a fixed headroom per rank
};

struct PlanRequest {
  MemPlanInput base;          // model, world, T, compute dtype, attention (the rest is searched)
  int64_t total_batch = 0;    // tokens per optimizer step over all ranks
  const HardwareSpec* hw = nullptr;
  PlanBudget budget;
  int ranks_per_node = 0;     // as TimeModelInput
  int threads_per_rank = 0;
  PlanPins pins;
  int top = 5;                // how many to return
  int sample = 0;             // and how many others drawn at random from the feasible space (priced)
  uint64_t seed = 1;
};

struct PlanCandidate {
  PlanChoice choice;
  int64_t device_need = 0, host_need = 0;  // the peaks with the margin
  double bound_s = 0;                      // the compute lower bound it was ordered by
  std::optional<PlanChoice> dominated_by;  // rule 3 dropped it for this fitting one, no slower
  TimePlan time;                           // its simulated step
};

struct PlanStats {
  int64_t space = 0;       // candidates enumerated (after the wrap rule)
  int64_t no_fit = 0;      // over the budget, or refused by the engine's checks
  int64_t dominated = 0;   // rule 3
  int64_t bounded = 0;     // fitting, not dominated, never priced (rule 4)
  int64_t priced = 0;      // simulated steps of candidates (the bounds' steps not counted)
  int64_t bound_sims = 0;  // simulated steps for the bounds
  double search_s = 0;     // wall time of the search
};

struct PlanResult {
  std::vector<PlanCandidate> top;     // fastest first
  std::vector<PlanCandidate> sample;  // drawn from the feasible space outside `top`
  PlanStats stats;
};

// Throws gpt::Error with one line for a total batch no world can take, pins the engine refuses, or a budget
// nothing fits (naming the nearest miss and what it needs).
PlanResult search_plans(const PlanRequest& rq);

// "#2 is 3.1% slower: exposed comm +12.00 ms (9.05 -> 21.05 ms)": the phase of the step that grew most.
std::string why_slower(const PlanCandidate& best, const PlanCandidate& next, int rank_of_next);

// The per-rank need of a run under the budget's rules, margin included (what search_plans holds it to).
void plan_need(const MemTotals& p, const PlanBudget& b, int64_t* device, int64_t* host);
bool plan_fits(int64_t device, int64_t host, const PlanBudget& b);

}  // namespace gpt
