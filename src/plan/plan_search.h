// The search behind `gpt plan` and `--plan auto`: the fastest configurations of one model on one machine
// that fit a per-rank memory budget, found without running anything. Every candidate is judged by the two
// planners that run the real model and engine on the simulated machine: memory by the engine's geometry
// and the activation plan (memplan.h, equal byte for byte to the ledger), time by one simulated step
// (timemodel.h). Nothing here restates the schedule.
//
// The space (plan_space.h): the mesh, tensor-parallel size T (dividing the heads, the padded vocabulary and
// the world, inside a node: T <= R, the ranks per node) x sequence parallelism (T > 1, where T divides the
// B*T_seq rows) x, over its D = world / T data-parallel ranks, strategy (full, grad_op, none, hybrid with every
// shard group G dividing D, 1 < G < D) x recompute (none, selective, every:4, every:2, full) x offload (none,
// optimizer, params, each with and without activations; on a cpu hardware file none only) x wrap (blocks:K) x
// gather slots (1, 2, 3) x micro-batch B (every divisor of the sequences each data-parallel rank takes per
// step: D x B x accumulation = the global batch in sequences) x reduce dtype (fp32, bf16) x no-sync (with
// accumulation). One data-parallel rank: strategy full, fp32, no no-sync. A world larger than the global batch
// in sequences is reached only with T > 1. Pins (plan_choice.h) fix any of them.
//
// Pruning, exact under the time model's structure, never by sampling:
//  0. the same program: one data-parallel rank with the states on the device gathers and reduces nothing
//     (resident parameters, direct gradients), so strategy none and the gather slots change no op of its step,
//     nor does the wrap without TP (with it the gradient norm sums each unit's split and whole tensors apart,
//     and SP all-reduces each unit's replicated gradients): only full, the first slot count and (T = 1) the
//     first wrap are searched there.
//  1. wraps: without TP blocks:K is searched only for K = ceil(L/u), u = 1..L. Any other K has as many units
//     as the next smaller such K' = ceil(L/ceil(L/K)), and larger gather slots: K' is at least as fast and
//     never larger. Under TP every K is searched: there a larger unit's gather can hold the one channel when
//     the group's collectives, waited at once, come, and K' can be the slower (the test shows one).
//     min-params:N groups the same equal blocks as some blocks:K.
//  2. memory: a candidate whose predicted peak (with the pre-flight margin) exceeds the budget is dropped.
//  3. dominance: for the same mesh, strategy, wrap, B, reduce dtype and no-sync, a fitting (recompute r,
//     offload o) is dropped when another fitting (r', o') recomputes no more (its bound is no larger; with
//     TP it also repeats no more of the group's collectives) and offloads a subset of o: offloading and
//     recomputing add work and save only memory. Without TP, more gather slots are never slower either; with
//     TP they can be (a gather prefetched earlier holds the one channel when the group's collective, waited
//     at once, comes next), so there only candidates of the same slots dominate. On a cpu file offload is not
//     searched at all: device and host are the same RAM, so it saves nothing.
//  4. bound: per (T, SP, recompute, B), one simulated micro-step bounds the step of every candidate sharing
//     them (plan_bounds.h): its compute (model ops, the same in every micro-step and whatever the engine does)
//     times the accumulation, and on a gpu file whose one profile and links price a rank alike at any ranks per
//     node, the tensor-parallel group's collectives, from the micro-step of the mesh's single data-parallel
//     rank (world T: every collective it prices is the group's). Each of the group's is issued and waited at
//     once, so it idles the compute stream for at least its whole length in any candidate; with SP the
//     coarsest wrap searched all-reduces the replicated gradients in the fewest calls (each unit's span a
//     multiple of C, so of T, elements: the same bytes whatever the wrap, and latency >= 0 per call). Then
//     the step's own scalar reductions (train_step.cpp): the host reads the loss once every stream has
//     finished the micro-steps (take_loss_sum synchronizes), reduces it over the world, and the gradient
//     norm's split tensors over the group, before it issues the optimizer; each priced as the simulated
//     communicators price it (NetworkModel::scalar_seconds).
//     Candidates are priced in the order of that bound, and the search stops when the bound reaches the K-th
//     best step found (branch and bound: the top K are exact). They are priced a fixed batch at a time on
//     threads (price_batch in plan_search.cpp): the same candidates, so the same report, on any machine.
//  5. the channel: every collective, the engine's and the group's, runs on one channel (NCCL's stream; MPI
//     progresses them in order), and the group's idle the compute stream while they run, so a step lasts at
//     least the group's collectives plus the larger of the compute and the engine's collectives (all done
//     before the loss is read: the engine waits for its reductions first), plus rule 4's scalars. The engine's
//     are measured per (T, strategy, G, reduce dtype, no-sync, wrap) from simulated steps of one and of two
//     micro-steps: train_step runs the same micro-step a times, and the engine's calls in one depend only on
//     whether it is the last, so the last's seconds plus (a - 1) times each earlier one's. They do not depend
//     on recompute, SP, B, the offloads or the gather slots. The coarsest wrap's, tried first for every wrap,
//     are no more (a unit is gathered and reduced whole: a coarser wrap moves no more bytes, in fewer calls,
//     each priced latency >= 0 + bytes / bandwidth). With one gather slot nothing is prefetched (Note [prefetch
//     window], param_side.h): each of the engine's all-gathers is issued at its unit's acquire, after the compute
//     queued before it (it overwrites the one slot that compute reads), and waited for at once, so the compute
//     stream idles for its whole length as for the group's: the step lasts at least the group's collectives
//     plus the compute plus those all-gathers, plus the scalars. The floors' steps give the all-gathers'
//     seconds too (without SP the group issues none; no fewer at the coarsest wrap: the same bytes in fewer
//     calls). Under TP, at any slots: each of the group's collectives is issued and waited at once, on its
//     inputs (the compute queued before it), and the channel runs them in issue order. So while one of the
//     engine's collectives runs, the compute stream runs at most to its next wait on the group's: that one was
//     issued after it and ends after it (one issued before has ended, and the compute queued before it with
//     it). During each of the engine's n collectives the compute stream runs at most one stretch of model
//     compute between two of the group's waits, and the step lasts at least the group's collectives + the
//     compute + (the engine's collectives - n x the longest stretch), plus the scalars. The stretch comes from
//     rule 4's micro-step (Timeline::longest_stretch: its waits at once are the group's, the engine's groups
//     having one rank there; the first and last stretches joined, as accumulation joins them); a candidate
//     runs the same model ops and has those waits, perhaps more. n comes from the floors' steps (their
//     collectives that take time less the group's), the same whatever recompute, SP, B, the offloads or the
//     slots; from the candidate's own wrap only (a coarser wrap's fewer calls would subtract less).
//     A candidate whose channel bound reaches the K-th best step is not priced.
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
  bool best_per_tp = false;   // and the fastest of each tensor-parallel size (exact too: priced until settled)
  int sample = 0;             // and how many others drawn at random from the feasible space (priced)
  uint64_t seed = 1;
};

// Rule 4's lower bound on the step of every candidate of one (T, SP, recompute, B), in its two parts.
struct StepBound {
  double compute = 0;  // forward + recompute + backward (model ops): the same whatever the engine does
  double tp = 0;       // the tensor-parallel group's collectives, where counted (0 otherwise)
  double scalars = 0;  // the loss's reduction over the world and the gradient norm's in the group, after them
  // Where the group's are counted (T > 1): the most compute the compute stream runs between two of the group's
  // waits (Timeline::longest_stretch of the same micro-step; -1: not known)
  double stretch = -1;
  double total() const { return compute + tp + scalars; }
};

struct PlanCandidate {
  PlanChoice choice;
  int64_t device_need = 0, host_need = 0;  // the peaks with the margin
  StepBound bound;                         // rule 4's, of its (T, SP, recompute, B)
  double bound_s = 0;                      // bound.total(): the lower bound it was ordered by
  std::optional<PlanChoice> dominated_by;  // rule 3 dropped it for this fitting one, no slower
  TimePlan time;                           // its simulated step
};

struct PlanStats {
  int64_t space = 0;       // candidates enumerated (after the wrap rule)
  int64_t no_fit = 0;      // over the budget, or refused by the engine's checks
  int64_t dominated = 0;   // rule 3
  int64_t bounded = 0;     // fitting, not dominated, never priced (rules 4 and 5)
  int64_t bounded_by_channel = 0;  // of those, by rule 5
  int64_t priced = 0;      // simulated steps of candidates (the bounds' steps not counted)
  int64_t bound_sims = 0;  // simulated steps for the bounds (rule 4's, and rule 5's tensor-parallel seconds)
  double search_s = 0;     // wall time of the search
};

// What the search knows of a tensor-parallel size the first choice does not use (the report's "why not").
struct OtherTp {
  int tp = 1;
  int64_t candidates = 0;   // its fitting, undominated candidates
  int64_t priced = 0;       // of those, priced (the rest were bounded out)
  StepBound least_bound;    // the least rule 4 bound among them: none of them is faster
  std::optional<PlanCandidate> fastest;  // the fastest priced
  bool exact = false;       // fastest is the size's fastest of all (best_per_tp)
};

struct PlanResult {
  std::vector<PlanCandidate> top;     // fastest first
  std::vector<PlanCandidate> sample;  // drawn from the feasible space outside `top`
  std::vector<OtherTp> other_tp;      // each tensor-parallel size but top[0]'s with a candidate that fits, T ascending
  std::vector<int> tp_searched;  // the tensor-parallel sizes of the space, ascending
  PlanStats stats;
};

// Throws gpt::Error with one line for a total batch no world can take, pins the engine refuses, or a budget
// nothing fits (naming the nearest miss and what it needs).
PlanResult search_plans(const PlanRequest& rq);

// "#2 is 3.1% slower than #1: exposed comm +12.00 ms (9.05 -> 21.05 ms per step)": the phase of the step that
// grew most. `next_name`: how the report names the slower one ("#2", "--tp 2's fastest").
std::string why_slower(const PlanCandidate& best, const PlanCandidate& next, const std::string& next_name);

// The per-rank need of a run under the budget's rules, margin included (what search_plans holds it to).
void plan_need(const MemTotals& p, const PlanBudget& b, int64_t* device, int64_t* host);
bool plan_fits(int64_t device, int64_t host, const PlanBudget& b);

}  // namespace gpt
