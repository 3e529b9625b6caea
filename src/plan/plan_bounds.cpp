// See plan_bounds.h: rule 4's bound per (T, SP, recompute, B) and rule 5's per engine.
#include "src/plan/plan_bounds.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <thread>

#include <omp.h>

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
StepBound PlanBounds::of_key(const MeshSpace& m, PlanChoice c) const {
  StepBound b;
  b.scalars = scalars(m.tp);
  try {
    if (counts_tp(m.tp)) {
      const TimePlan p = one_rank_micro_step(rq_, c, s_.coarsest_wrap);
      b.compute = c.accum * p.compute_s;
      b.tp = c.accum * p.comm_s;
      if (m.tp > 1) b.stretch = p.longest_stretch_s;
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
// engine's collectives do not depend on. Its comm_s holds the group's collectives too (measured apart, taken
// out by the caller); its gather_s only the engine's (without SP the group gathers nothing).
TimePlan PlanBounds::floor_step(const PlanChoice& of, const WrapPolicy& wrap, int accum) const {
  PlanChoice c;
  c.tp = TpOptions{of.tp.size, false};
  c.strategy = of.strategy, c.shard_group = of.shard_group, c.reduce = of.reduce, c.no_sync = of.no_sync;
  c.wrap = wrap;
  c.gather_slots = 1, c.B = 1;
  TimeModelInput t;
  t.ranks_per_node = rq_.ranks_per_node;
  t.threads_per_rank = rq_.threads_per_rank;
  t.run = c.apply(rq_.base);
  t.grad_accum = accum;
  return plan_time(t, *rq_.hw);
}

// Every micro-step but the last issues the same collectives (train_step runs one micro-step `accum` times, and
// the engine's calls in one depend only on whether it is the last), so steps of one and two micro-steps give
// the last's seconds and each earlier one's.
PlanBounds::FloorKey PlanBounds::floor_key(const PlanChoice& c, const WrapPolicy& wrap) {
  return FloorKey{c.tp.size, (int)c.strategy, c.shard_group, (int)c.reduce, c.no_sync, wrap.str()};
}

std::optional<PlanBounds::EngineSeconds> PlanBounds::floor_if_known(const PlanChoice& c, const WrapPolicy& wrap,
                                                                     Missing* missing) {
  if (c.tp.size > 1 && !counts_tp(c.tp.size)) return EngineSeconds{};  // the group's cannot be told apart
  const FloorKey key = floor_key(c, wrap);
  const bool two = c.accum > 1;
  const auto it = floors_.find(key);
  if (it != floors_.end()) {
    const Floor& f = it->second;
    if (f.refused_last || (two && f.refused_earlier)) return EngineSeconds{};  // priced one by one
    if (f.last.comm >= 0 && (!two || f.each_earlier.comm >= 0)) {
      const double earlier = c.accum - 1;  // 0 without accumulation, where each_earlier is not measured
      return EngineSeconds{f.last.comm + earlier * std::max(0.0, f.each_earlier.comm),
                           f.last.gathers + earlier * f.each_earlier.gathers,
                           f.last.calls + earlier * f.each_earlier.calls};
    }
  }
  if (missing) {
    const auto [at, added] = missing->at.emplace(key, missing->needs.size());
    if (added)
      missing->needs.push_back({c, wrap, two ? 2 : 1});
    else if (two)
      missing->needs[at->second].accum = 2;
  }
  return std::nullopt;
}

// Each T's group seconds first (from the first need of that T, as one at a time would), then every floor step,
// each on threads; a step the engine refuses marks its floor refused.
void PlanBounds::measure(Missing& missing) {
  std::vector<const Missing::Need*> first_of_tp;
  for (const Missing::Need& n : missing.needs) {
    const int T = n.choice.tp.size;
    bool seen = T == 1 || tp_micro_.count(T);
    for (const Missing::Need* f : first_of_tp) seen = seen || f->choice.tp.size == T;
    if (!seen) first_of_tp.push_back(&n);
  }
  std::vector<double> tp_s(first_of_tp.size(), -1);
  on_threads(first_of_tp.size(), [&](size_t i) {
    PlanChoice c;
    c.tp = TpOptions{first_of_tp[i]->choice.tp.size, false};
    c.gather_slots = 1, c.B = 1;
    try {
      tp_s[i] = one_rank_micro_step(rq_, c, first_of_tp[i]->wrap).comm_s;
    } catch (const Error&) {
    }
  });
  st_.bound_sims += (int64_t)first_of_tp.size();
  for (size_t i = 0; i < first_of_tp.size(); i++)
    if (tp_s[i] >= 0) tp_micro_[first_of_tp[i]->choice.tp.size] = tp_s[i];

  struct Job {
    const Missing::Need* need;
    Floor* floor;
    int accum;
    EngineSeconds step;  // comm -1: refused
  };
  std::vector<Job> jobs;
  for (const Missing::Need& n : missing.needs) {
    Floor& f = floors_[floor_key(n.choice, n.wrap)];
    if (n.choice.tp.size > 1 && !tp_micro_.count(n.choice.tp.size)) {
      f.refused_last = true;  // the group's step was refused
      continue;
    }
    if (f.last.comm < 0 && !f.refused_last) jobs.push_back({&n, &f, 1, {}});
    if (n.accum == 2 && f.each_earlier.comm < 0 && !f.refused_earlier) jobs.push_back({&n, &f, 2, {}});
  }
  on_threads(jobs.size(), [&](size_t j) {
    try {
      const TimePlan p = floor_step(jobs[j].need->choice, jobs[j].need->wrap, jobs[j].accum);
      int64_t tp_calls = 0;
      for (int64_t n : p.tp_calls) tp_calls += n;
      jobs[j].step = EngineSeconds{p.comm_s, p.gather_s, (double)(p.timed_calls - tp_calls)};
    } catch (const Error&) {
    }
  });
  st_.bound_sims += (int64_t)jobs.size();
  for (int accum : {1, 2})  // each earlier one's is the difference from the last's
    for (const Job& j : jobs) {
      if (j.accum != accum) continue;
      Floor& f = *j.floor;
      const int T = j.need->choice.tp.size;
      const double tp = T > 1 ? tp_micro_.at(T) : 0.0;
      const EngineSeconds engine{std::max(0.0, j.step.comm - accum * tp), j.step.gathers, j.step.calls};
      if (accum == 1) {
        j.step.comm < 0 ? (void)(f.refused_last = true) : (void)(f.last = engine);
      } else if (j.step.comm < 0 || f.refused_last) {
        f.refused_earlier = true;
      } else {
        f.each_earlier = EngineSeconds{std::max(0.0, engine.comm - f.last.comm),
                                       std::max(0.0, engine.gathers - f.last.gathers), engine.calls - f.last.calls};
      }
    }
  missing = Missing{};
}

double PlanBounds::engine_floor(const PlanChoice& c, const WrapPolicy& wrap) {
  Missing m;
  std::optional<EngineSeconds> f = floor_if_known(c, wrap, &m);
  if (!f) {
    measure(m);
    f = floor_if_known(c, wrap, nullptr);
  }
  return f->comm;
}

// Rule 5: one channel carries every collective, and the group's idle the compute stream while they run, so
// step >= group + max(compute, engine) + the scalar reductions after them. With one gather slot the engine's
// all-gathers idle it too (plan_search.h), so then step >= group + compute + gathers + scalars as well. Under
// TP, during each of the engine's n collectives the compute stream runs at most one stretch between the group's
// waits, so step >= group + compute + (engine - n x stretch) + scalars: from the wrap's own floor only (a
// coarser wrap's has fewer, longer collectives, and this term is not monotone in them).
// (1 - 1e-12): the seconds are sums in another order than the step's.
std::optional<double> PlanBounds::channel_if_known(const PlanCandidate& c, const WrapPolicy& wrap, bool own,
                                                   Missing* missing) {
  const std::optional<EngineSeconds> engine = floor_if_known(c.choice, wrap, missing);
  if (!engine) return std::nullopt;
  if (engine->comm < 0) return 0.0;
  double step = c.bound.tp + std::max(c.bound.compute, engine->comm);
  if (c.choice.gather_slots == 1) step = std::max(step, c.bound.tp + c.bound.compute + engine->gathers);
  if (own && c.bound.stretch >= 0)
    step = std::max(step, c.bound.tp + c.bound.compute + std::max(0.0, engine->comm - engine->calls * c.bound.stretch));
  return (1 - 1e-12) * (step + c.bound.scalars);
}

double PlanBounds::channel(const PlanCandidate& c) {
  engine_floor(c.choice, c.choice.wrap);  // measured when it is not yet
  return *channel_if_known(c, c.choice.wrap, true, nullptr);
}

// The coarsest wrap's floor, shared by every wrap, first; the candidate's own (a step each) only when needed.
bool PlanBounds::channel_known(const PlanCandidate& c, double step, bool* reaches, Missing& missing) {
  const std::optional<double> coarse = channel_if_known(c, s_.coarsest_wrap, false, &missing);
  if (!coarse) return false;
  if (*coarse >= step) return *reaches = true;
  const std::optional<double> own = channel_if_known(c, c.choice.wrap, true, &missing);
  if (!own) return false;
  *reaches = *own >= step;
  return true;
}

bool PlanBounds::channel_reaches(const PlanCandidate& c, double step) {
  bool reaches = false;
  for (;;) {
    Missing m;
    if (channel_known(c, step, &reaches, m)) return reaches;
    measure(m);
  }
}

void on_threads(size_t n, const std::function<void(size_t)>& work) {
  std::vector<std::exception_ptr> failed(n);
  auto one = [&](size_t i) {
    try {
      work(i);
    } catch (...) {
      failed[i] = std::current_exception();
    }
  };
  // Each thread takes the next index not taken yet: the simulated steps of a batch differ in length (the
  // accumulation, the wrap), so a fixed share per thread would leave one idle while another finishes its own.
  const size_t threads = std::max<size_t>(1, std::min(n, (size_t)std::max(1, omp_get_max_threads())));
  std::atomic<size_t> next{0};
  auto take = [&] {
    for (size_t i; (i = next.fetch_add(1)) < n;) one(i);
  };
  std::vector<std::thread> pool;
  for (size_t w = 1; w < threads; w++) pool.emplace_back(take);
  take();
  for (std::thread& t : pool) t.join();
  for (const std::exception_ptr& f : failed)
    if (f) std::rethrow_exception(f);
}

}  // namespace gpt
