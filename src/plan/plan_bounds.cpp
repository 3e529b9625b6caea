// See plan_bounds.h: rule 4's bound per (T, SP, recompute, B) and rule 5's per engine.
#include "src/plan/plan_bounds.h"

#include <algorithm>

#include "src/core/check.h"
#include "src/plan/collectives.h"

namespace gpt {
namespace {

// One micro-step of c on the mesh's single data-parallel rank (world T): the engine's groups have one rank, so
// every collective it prices is the tensor-parallel group's. The engine's own choices are its plainest.
TimePlan one_rank_micro_step(const PlanRequest& rq, PlanChoice c, const WrapPolicy& wrap) {
  c.strategy = ShardStrategy::full, c.shard_group = 0, c.gather_slots = 1, c.offload = OffloadSet{};
  c.reduce = DType::F32, c.no_sync = false, c.wrap = wrap;
  MemPlanInput base = rq.base;
  base.world = c.tp.size;
  TimeModelInput t;
  t.run = c.apply(base);
  t.grad_accum = 1;
  t.ranks_per_node = c.tp.size;
  t.threads_per_rank = rq.threads_per_rank;
  return plan_time(t, *rq.hw);
}

}  // namespace

// The group's collectives are counted where a rank is priced the same whatever the ranks per node (a gpu file
// with one profile and no calibrated fits), the group sits inside a node (its link the intra-node one at T
// ranks as at R), and collectives overlap compute: each of the group's is issued and waited at once, so the
// compute stream idles for at least its whole length, whatever else is on the channel.
bool PlanBounds::counts_tp(int tp) const {
  const HardwareSpec& hw = *rq_.hw;
  return hw.kind == "gpu" && hw.profiles.size() == 1 && hw.measured.empty() && hw.overlap && tp <= s_.ranks_per_node;
}

// The model's compute of one micro-step is the same in every micro-step and whatever the engine does (its ops
// are the model's; the engine's are their own phase), so one micro-step times the accumulation bounds them all.
// Where the group's collectives are counted, the same step on one data-parallel rank prices them too; with
// sequence parallelism the coarsest wrap searched all-reduces the replicated gradients in the fewest calls
// (each unit's span, a multiple of C elements, so of T: the same bytes in all, and latency per call).
StepBound PlanBounds::of_key(const MeshSpace& m, PlanChoice c) {
  st_.bound_sims++;
  StepBound b;
  b.scalars = scalars(m.tp);
  try {
    if (counts_tp(m.tp)) {
      const TimePlan p = one_rank_micro_step(rq_, c, s_.coarsest_wrap);
      b.compute = c.accum * p.compute_s;
      b.tp = c.accum * p.comm_s;
      return b;
    }
    c.strategy = m.strategies.front().first, c.shard_group = m.strategies.front().second;
    c.gather_slots = 1, c.offload = OffloadSet{}, c.reduce = DType::F32, c.no_sync = false;
    TimeModelInput t;
    t.run = c.apply(rq_.base);
    t.grad_accum = 1;
    t.ranks_per_node = rq_.ranks_per_node;
    t.threads_per_rank = rq_.threads_per_rank;
    b.compute = c.accum * plan_time(t, *rq_.hw).compute_s;
  } catch (const Error&) {
    return StepBound{};  // no bound: the candidates are priced (and refused) one by one
  }
  return b;
}

// The loss's reduction over the world and the gradient norm's over the group, as the simulated step's
// communicators price them (a group on R ranks per node, r of them on one node).
double PlanBounds::scalars(int tp) const {
  const NetworkModel net(*rq_.hw, s_.ranks_per_node);
  const int N = rq_.base.world, R = s_.ranks_per_node;
  return net.scalar_seconds(N, std::min(N, R)) + net.scalar_seconds(tp, std::min(tp, R));
}

// The floors' steps: B = 1, no recompute, no sequence parallelism, nothing offloaded, one gather slot: what the
// engine's collectives do not depend on. Seconds of the engine's collectives in a step of `accum` micro-steps
// (the group's, measured apart, taken out).
double PlanBounds::floor_step(const PlanChoice& of, const WrapPolicy& wrap, int accum) {
  PlanChoice c;
  c.tp = TpOptions{of.tp.size, false};
  c.strategy = of.strategy, c.shard_group = of.shard_group, c.reduce = of.reduce, c.no_sync = of.no_sync;
  c.wrap = wrap;
  c.gather_slots = 1, c.B = 1;
  const int T = c.tp.size;
  auto tp = tp_micro_.find(T);
  if (tp == tp_micro_.end()) {
    st_.bound_sims += T > 1;
    tp = tp_micro_.emplace(T, T > 1 ? one_rank_micro_step(rq_, c, c.wrap).comm_s : 0.0).first;
  }
  TimeModelInput t;
  t.ranks_per_node = rq_.ranks_per_node;
  t.threads_per_rank = rq_.threads_per_rank;
  t.run = c.apply(rq_.base);
  t.grad_accum = accum;
  st_.bound_sims++;
  return std::max(0.0, plan_time(t, *rq_.hw).comm_s - accum * tp->second);
}

// Every micro-step but the last issues the same collectives (train_step runs one micro-step `accum` times, and
// the engine's calls in one depend only on whether it is the last), so steps of one and two micro-steps give
// the last's seconds and each earlier one's.
double PlanBounds::engine_floor(const PlanChoice& c, const WrapPolicy& wrap) {
  if (c.tp.size > 1 && !counts_tp(c.tp.size)) return -1;  // the group's seconds cannot be told apart
  const auto key = std::make_tuple(c.tp.size, (int)c.strategy, c.shard_group, (int)c.reduce, c.no_sync, wrap.str());
  Floor& f = floors_[key];
  try {
    if (f.last < 0) f.last = floor_step(c, wrap, 1);
    if (c.accum > 1 && f.each_earlier < 0) f.each_earlier = std::max(0.0, floor_step(c, wrap, 2) - f.last);
  } catch (const Error&) {
    return -1;  // the engine refuses it: its candidates are priced (and refused) one by one
  }
  return f.last + (c.accum - 1) * std::max(0.0, f.each_earlier);
}

// Rule 5: one channel carries every collective, and the group's idle the compute stream while they run, so
// step >= group + max(compute, engine) + the scalar reductions after them. (1 - 1e-12): the seconds are sums in
// another order than the step's.
double PlanBounds::channel_at(const PlanCandidate& c, const WrapPolicy& wrap) {
  const double engine = engine_floor(c.choice, wrap);
  if (engine < 0) return 0;
  return (1 - 1e-12) * (c.bound.tp + std::max(c.bound.compute, engine) + c.bound.scalars);
}

double PlanBounds::channel(const PlanCandidate& c) { return channel_at(c, c.choice.wrap); }

// The coarsest wrap's floor, shared by every wrap, first; the candidate's own (a step each) only when needed.
bool PlanBounds::channel_reaches(const PlanCandidate& c, double step) {
  return channel_at(c, s_.coarsest_wrap) >= step || channel_at(c, c.choice.wrap) >= step;
}

}  // namespace gpt
