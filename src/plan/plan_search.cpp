// See plan_search.h: enumerate, prune by memory and dominance, price in the order of a compute bound.
#include "src/plan/plan_search.h"

#include <algorithm>
#include <array>
#include <optional>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>

#include "src/core/check.h"
#include "src/core/rng.h"
#include "src/core/size_math.h"

namespace gpt {
namespace {

using Clock = std::chrono::steady_clock;

// The values of each dimension, pins applied.
struct Space {
  std::vector<std::pair<ShardStrategy, int>> strategies;  // (strategy, hybrid's G)
  std::vector<RecomputePolicy> recomputes;                // in order of recompute work, least first
  std::vector<OffloadSet> offloads;
  std::vector<WrapPolicy> wraps;
  std::vector<int> slots, Bs;
  std::vector<DType> reduces;
  std::vector<bool> no_syncs;
  int seqs_per_rank = 0;  // sequences one rank takes per optimizer step
};

template <class T>
std::vector<T> pinned_or(const std::optional<T>& pin, std::vector<T> all) {
  return pin ? std::vector<T>{*pin} : all;
}

std::vector<std::pair<ShardStrategy, int>> strategies(const PlanRequest& rq) {
  const int N = rq.base.world;
  std::vector<std::pair<ShardStrategy, int>> all;
  if (N == 1) {  // full and none are one program at one rank (G = 1): none is searched only when pinned
    all = {{ShardStrategy::full, 0}};
    if (rq.pins.strategy && *rq.pins.strategy == ShardStrategy::none) all = {{ShardStrategy::none, 0}};
  } else {
    all = {{ShardStrategy::full, 0}, {ShardStrategy::grad_op, 0}, {ShardStrategy::none, 0}};
    for (int G = 2; G < N; G++)
      if (N % G == 0) all.push_back({ShardStrategy::hybrid, G});
  }
  const PlanPins& p = rq.pins;
  std::vector<std::pair<ShardStrategy, int>> out;
  for (const auto& s : all)
    if ((!p.strategy || *p.strategy == s.first) && (!p.shard_group || *p.shard_group == s.second)) out.push_back(s);
  if (p.strategy && *p.strategy == ShardStrategy::hybrid && p.shard_group && out.empty())
    out.push_back({ShardStrategy::hybrid, *p.shard_group});  // the engine's checks will say why it cannot run
  return out;
}

std::vector<WrapPolicy> wraps(int L) {
  std::vector<WrapPolicy> out;
  int last = 0;
  for (int u = L; u >= 1; u--) {  // K = ceil(L/u) rises as u falls
    const int K = (L + u - 1) / u;
    if (K == last) continue;
    last = K;
    out.push_back(K == 1 ? WrapPolicy{} : WrapPolicy::parse(str("blocks:", K)));
  }
  return out;
}

Space make_space(const PlanRequest& rq) {
  const MemPlanInput& b = rq.base;
  const int64_t seq_tokens = (int64_t)b.T * b.world;
  GPT_CHECK(rq.total_batch >= seq_tokens && rq.total_batch % seq_tokens == 0, "--total-batch ", rq.total_batch,
            ": must be a positive multiple of T x world = ", b.T, " x ", b.world, " = ", seq_tokens,
            " (every rank takes whole sequences)");
  GPT_CHECK(rq.total_batch / seq_tokens <= (1 << 20), "--total-batch ", rq.total_batch, ": ",
            rq.total_batch / seq_tokens, " sequences per rank per step is past the 2^20 gpt accepts");
  Space s;
  s.seqs_per_rank = (int)(rq.total_batch / seq_tokens);
  const PlanPins& p = rq.pins;
  s.strategies = strategies(rq);
  const int L = b.cfg.num_layers;
  std::vector<RecomputePolicy> rc = {RecomputePolicy::parse("none"), RecomputePolicy::parse("selective")};
  for (int k : {4, 2})
    if (k < L) rc.push_back(RecomputePolicy::parse(str("every:", k)));
  rc.push_back(RecomputePolicy::parse("full"));
  s.recomputes = pinned_or(p.recompute, rc);
  const bool cpu = rq.hw->kind == "cpu";
  std::vector<OffloadSet> off = {OffloadSet{}};
  if (!cpu)
    for (const char* o : {"activations", "optimizer", "optimizer,activations", "params", "params,activations"})
      off.push_back(OffloadSet::parse(o));
  s.offloads = pinned_or(p.offload, off);
  s.wraps = pinned_or(p.wrap, wraps(L));
  s.slots = pinned_or(p.gather_slots, {1, 2, 3});
  std::vector<int> Bs;
  for (int B = 1; B <= s.seqs_per_rank; B++)
    if (s.seqs_per_rank % B == 0) Bs.push_back(B);
  s.Bs = pinned_or(p.B, Bs);
  if (p.B)
    GPT_CHECK(s.seqs_per_rank % *p.B == 0, "-B ", *p.B, ": does not divide the ", s.seqs_per_rank,
              " sequences each rank takes per step (--total-batch ", rq.total_batch, " / (T x world))");
  s.reduces = pinned_or(p.reduce, b.world > 1 ? std::vector<DType>{DType::F32, DType::BF16} : std::vector<DType>{DType::F32});
  s.no_syncs = pinned_or(p.no_sync, b.world > 1 ? std::vector<bool>{false, true} : std::vector<bool>{false});
  return s;
}

bool subset(const OffloadSet& a, const OffloadSet& b) {  // a offloads no more than b
  return (int)a.states <= (int)b.states && (!a.activations || b.activations);
}

// Seconds of forward + recompute + backward: the same for every strategy, wrap, slot count and offload.
double compute_bound(const PlanRequest& rq, const PlanChoice& c, int64_t* sims) {
  TimeModelInput t;
  t.run = c.apply(rq.base);
  t.grad_accum = c.accum;
  t.ranks_per_node = rq.ranks_per_node;
  t.threads_per_rank = rq.threads_per_rank;
  (*sims)++;
  try {
    return plan_time(t, *rq.hw).compute_s;
  } catch (const Error&) {
    return 0;  // no bound: the candidates are priced (and refused) one by one
  }
}

struct Enumerated {
  std::vector<PlanCandidate> frontier;  // fitting, not dominated
  std::vector<PlanCandidate> feasible;  // every fitting candidate (the sample's pool)
  PlanCandidate nearest;                // the smallest miss when nothing fits
  double nearest_excess = -1;
};

// Memory of one step's model per (recompute, activation offload) at one B: the half of the memory plan that
// does not depend on the rest (memplan.h: engine_memory + step_memory = memory_from_geometry).
struct StepMemory {
  std::vector<std::array<std::optional<MemTotals>, 2>> of;  // [recompute][activations]; empty: refused
};

StepMemory step_memories(const PlanRequest& rq, const Space& s, const PlanChoice& rest) {
  StepMemory m;
  for (const RecomputePolicy& r : s.recomputes) {
    m.of.emplace_back();
    for (int act = 0; act < 2; act++) {
      PlanChoice c = rest;
      c.recompute = r;
      c.offload.activations = act == 1;
      try {
        m.of.back()[act] = step_memory(c.apply(rq.base));
      } catch (const Error&) {
      }
    }
  }
  return m;
}

void note_miss(const PlanRequest& rq, const PlanCandidate& c, Enumerated& e) {
  const PlanBudget& b = rq.budget;
  const double ex = std::max(b.device < 0 ? 0.0 : (double)c.device_need / (double)b.device,
                             b.host < 0 || b.one_ram ? 0.0 : (double)c.host_need / (double)b.host);
  if (e.nearest_excess < 0 || ex < e.nearest_excess) e.nearest_excess = ex, e.nearest = c;
}

// The engine's half of the memory plan for one rest, per offload of the states (empty: refused).
std::map<int, std::optional<MemTotals>> engine_memories(const PlanRequest& rq, const Space& s, const PlanChoice& rest) {
  std::map<int, std::optional<MemTotals>> engine;
  for (const OffloadSet& o : s.offloads) {
    if (engine.count((int)o.states)) continue;
    PlanChoice c = rest;
    c.offload = o;
    try {
      engine[(int)o.states] = engine_memory(c.apply(rq.base));
    } catch (const Error&) {
      engine[(int)o.states] = std::nullopt;
    }
  }
  return engine;
}

struct Fit {
  PlanCandidate c;
  size_t recompute;  // index into Space::recomputes: least work first
};

// j is provably no slower than i: no more recompute, a subset of the offloads, at least as many gather slots.
bool dominates(const Fit& j, const Fit& i) {
  const PlanChoice &a = j.c.choice, &b = i.c.choice;
  const bool same = j.recompute == i.recompute && a.offload.states == b.offload.states &&
                    a.offload.activations == b.offload.activations && a.gather_slots == b.gather_slots;
  return !same && j.c.bound_s <= i.c.bound_s && j.recompute <= i.recompute && subset(a.offload, b.offload) &&
         a.gather_slots >= b.gather_slots;
}

// One rank with the states on the device gathers nothing and reduces nothing (resident parameters, direct
// gradients: geometry.h), so the wrap and the gather slots change no op of its step: every such candidate runs
// the program of the first wrap and slot count searched, which stands for them all.
bool same_program_as_another(const PlanRequest& rq, const Space& s, const PlanChoice& c) {
  if (rq.base.world != 1 || c.offload.states != OffloadMode::none) return false;
  return !(c.wrap == s.wraps.front()) || c.gather_slots != s.slots.front();
}

// The (gather slots, recompute, offload) choices of one rest: which fit, and which of those no other dominates.
void add_rest(const PlanRequest& rq, const Space& s, PlanChoice rest, const std::vector<int>& slots,
              const std::vector<double>& bounds, const StepMemory& step, Enumerated& e, PlanStats& st) {
  std::vector<Fit> fit;
  for (int k : slots) {
    rest.gather_slots = k;
    std::map<int, std::optional<MemTotals>> engine = engine_memories(rq, s, rest);
    for (size_t r = 0; r < s.recomputes.size(); r++)
      for (const OffloadSet& o : s.offloads) {
        PlanCandidate c;
        c.choice = rest;
        c.choice.recompute = s.recomputes[r];
        c.choice.offload = o;
        if (same_program_as_another(rq, s, c.choice)) continue;
        st.space++;
        c.bound_s = bounds[r];
        const std::optional<MemTotals>& eng = engine[(int)o.states];
        const std::optional<MemTotals>& stp = step.of[r][o.activations ? 1 : 0];
        if (!eng || !stp) {
          st.no_fit++;
          continue;
        }
        plan_need(MemTotals{sat_add({eng->device, stp->device}), sat_add({eng->host, stp->host})}, rq.budget,
                  &c.device_need, &c.host_need);
        if (!plan_fits(c.device_need, c.host_need, rq.budget)) {
          st.no_fit++;
          note_miss(rq, c, e);
          continue;
        }
        fit.push_back({c, r});
      }
  }
  for (size_t i = 0; i < fit.size(); i++) {
    for (size_t j = 0; j < fit.size() && !fit[i].c.dominated_by; j++)
      if (dominates(fit[j], fit[i])) fit[i].c.dominated_by = fit[j].c.choice;
    e.feasible.push_back(fit[i].c);
    if (fit[i].c.dominated_by)
      st.dominated++;
    else
      e.frontier.push_back(fit[i].c);
  }
}

Enumerated enumerate(const PlanRequest& rq, const Space& s, PlanStats& st) {
  Enumerated e;
  const int L = rq.base.cfg.num_layers;
  for (int B : s.Bs) {
    PlanChoice rest;
    rest.B = B;
    rest.accum = s.seqs_per_rank / B;
    rest.strategy = s.strategies.empty() ? ShardStrategy::full : s.strategies[0].first;
    rest.shard_group = s.strategies.empty() ? 0 : s.strategies[0].second;
    rest.gather_slots = 1;
    std::vector<double> bounds;
    for (const RecomputePolicy& r : s.recomputes) {
      rest.recompute = r;
      bounds.push_back(compute_bound(rq, rest, &st.bound_sims));
    }
    const StepMemory step = step_memories(rq, s, rest);
    for (const auto& [strategy, G] : s.strategies)
      for (const WrapPolicy& w : s.wraps) {
        const int units = (int)w.groups(L, 1).size();
        std::vector<int> slots;  // more slots than units prefetch nothing more
        for (int k : s.slots)
          if (k <= std::max(1, units) || rq.pins.gather_slots) slots.push_back(k);
        for (DType red : s.reduces)
          for (bool ns : s.no_syncs) {
            if (ns && rest.accum == 1 && !rq.pins.no_sync) continue;  // no-sync needs accumulation
            PlanChoice c = rest;
            c.strategy = strategy, c.shard_group = G, c.wrap = w, c.reduce = red, c.no_sync = ns;
            add_rest(rq, s, c, slots, bounds, step, e, st);
          }
      }
  }
  return e;
}

bool price(const PlanRequest& rq, PlanCandidate& c, PlanStats& st) {
  TimeModelInput t;
  t.run = c.choice.apply(rq.base);
  t.grad_accum = c.choice.accum;
  t.ranks_per_node = rq.ranks_per_node;
  t.threads_per_rank = rq.threads_per_rank;
  st.priced++;
  try {
    c.time = plan_time(t, *rq.hw);
    return true;
  } catch (const Error&) {
    return false;
  }
}

bool faster(const PlanCandidate& a, const PlanCandidate& b) {
  if (a.time.step_s != b.time.step_s) return a.time.step_s < b.time.step_s;
  if (a.device_need != b.device_need) return a.device_need < b.device_need;  // equally fast: the smaller
  return a.choice.flags(1, 1) < b.choice.flags(1, 1);  // a fixed order for ties
}

[[noreturn]] void nothing_fits(const PlanRequest& rq, const Enumerated& e) {
  const PlanBudget& b = rq.budget;
  const int64_t total = rq.total_batch;
  auto budget_text = [&] {
    return b.one_ram ? str(format_bytes(b.device), " of memory per rank")
                     : str(format_bytes(b.device), " device", b.host >= 0 ? ", " + format_bytes(b.host) + " host" : "",
                           " per rank");
  };
  GPT_CHECK(e.nearest_excess >= 0, "gpt plan: the engine accepts no configuration of the pinned flags");
  const PlanCandidate& n = e.nearest;
  fail("gpt plan: nothing fits the budget (", budget_text(), ", pre-flight margin included); the nearest miss is ",
       n.choice.flags(rq.base.T, total), ", which needs ", format_bytes(n.device_need),
       b.one_ram ? "" : str(" device and ", format_bytes(n.host_need), " host"),
       " per rank: give more ranks (--world) or a larger budget");
}

}  // namespace

void plan_need(const MemTotals& p, const PlanBudget& b, int64_t* device, int64_t* host) {
  auto with_margin = [&](int64_t x) { return sat_add({x, (int64_t)((double)x * b.margin), b.margin_bytes}); };
  if (b.one_ram) {
    *device = with_margin(sat_add({p.device, p.host}));
    *host = 0;
  } else {
    *device = with_margin(p.device);
    *host = p.host > 0 ? with_margin(p.host) : 0;
  }
}

bool plan_fits(int64_t device, int64_t host, const PlanBudget& b) {
  return (b.device < 0 || device <= b.device) && (b.host < 0 || b.one_ram || host <= b.host);
}

PlanResult search_plans(const PlanRequest& rq) {
  GPT_CHECK(rq.hw, "gpt plan: no hardware file");
  GPT_CHECK(rq.top >= 1, "--top must be >= 1");
  const auto t0 = Clock::now();
  PlanResult res;
  validate_plan_input(rq.base);
  const Space s = make_space(rq);
  Enumerated e = enumerate(rq, s, res.stats);
  if (e.frontier.empty()) nothing_fits(rq, e);
  std::stable_sort(e.frontier.begin(), e.frontier.end(),
                   [](const PlanCandidate& a, const PlanCandidate& b) { return a.bound_s < b.bound_s; });
  std::vector<PlanCandidate> best;  // sorted, at most rq.top
  for (size_t i = 0; i < e.frontier.size(); i++) {
    PlanCandidate& c = e.frontier[i];
    if ((int)best.size() == rq.top && c.bound_s >= best.back().time.step_s) {
      res.stats.bounded += (int64_t)(e.frontier.size() - i);
      break;
    }
    if (!price(rq, c, res.stats)) continue;
    best.insert(std::upper_bound(best.begin(), best.end(), c, faster), c);
    if ((int)best.size() > rq.top) best.pop_back();
  }
  GPT_CHECK(!best.empty(), "gpt plan: the simulated step refused every configuration that fits");
  res.top = best;
  std::vector<PlanCandidate> pool;
  for (const PlanCandidate& c : e.feasible) {
    bool in_top = false;
    for (const PlanCandidate& t : best) in_top = in_top || t.choice == c.choice;
    if (!in_top) pool.push_back(c);
  }
  Rng rng(rq.seed);
  for (int k = 0; k < rq.sample && !pool.empty(); k++) {
    const size_t j = (size_t)(rng.next_u64() % pool.size());
    PlanCandidate c = pool[j];
    pool.erase(pool.begin() + (long)j);
    if (price(rq, c, res.stats)) res.sample.push_back(c);
  }
  res.stats.search_s = std::chrono::duration<double>(Clock::now() - t0).count();
  return res;
}

std::string why_slower(const PlanCandidate& best, const PlanCandidate& next, int rank_of_next) {
  const StepPhases& a = best.time.phases;
  const StepPhases& b = next.time.phases;
  struct Delta {
    const char* name;
    double before, after;
  };
  const Delta d[] = {{"forward", a.forward, b.forward},       {"recompute", a.recompute, b.recompute},
                     {"backward", a.backward, b.backward},    {"engine", a.engine, b.engine},
                     {"copies", a.copies, b.copies},          {"exposed comm", a.exposed_comm, b.exposed_comm},
                     {"optimizer", a.optimizer, b.optimizer}, {"host wait", a.host_wait, b.host_wait}};
  size_t worst = 0;
  for (size_t i = 1; i < sizeof d / sizeof d[0]; i++)
    if (d[i].after - d[i].before > d[worst].after - d[worst].before) worst = i;
  const double pct = 100.0 * (next.time.step_s / best.time.step_s - 1.0);
  char buf[200];
  std::snprintf(buf, sizeof buf, "#%d is %.2f%% slower than #1: %s %+.2f ms (%.2f -> %.2f ms per step)", rank_of_next,
                pct, d[worst].name, 1e3 * (d[worst].after - d[worst].before), 1e3 * d[worst].before, 1e3 * d[worst].after);
  return buf;
}

}  // namespace gpt
