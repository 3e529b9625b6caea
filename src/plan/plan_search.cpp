// See plan_search.h: enumerate, prune by memory and dominance, price in the order of a compute bound.
#include "src/plan/plan_search.h"

#include <algorithm>
#include <array>
#include <optional>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <iterator>
#include <map>
#include <unordered_map>

#include "src/core/check.h"
#include "src/core/rng.h"
#include "src/core/size_math.h"
#include "src/plan/plan_bounds.h"
#include "src/plan/plan_space.h"

namespace gpt {
namespace {

using Clock = std::chrono::steady_clock;

bool subset(const OffloadSet& a, const OffloadSet& b) {  // a offloads no more than b
  return (int)a.states <= (int)b.states && (!a.activations || b.activations);
}

struct Enumerated {
  std::vector<PlanCandidate> frontier;  // fitting, not dominated
  std::vector<PlanCandidate> feasible;  // every fitting candidate (the sample's pool)
  PlanCandidate nearest;                // the smallest miss when nothing fits
  double nearest_excess = -1;
  std::string refusal;                  // the engine's first refusal, for when it refuses everything
};

// Memory of one step's model per (recompute, activation offload) at one (T, SP, B): the half of the memory
// plan that does not depend on the rest (memplan.h: engine_memory + step_memory = memory_from_geometry).
struct StepMemory {
  std::vector<std::array<std::optional<MemTotals>, 2>> of;  // [recompute][activations]; empty: refused
};

// *refusal: the engine's first refusal among them (left as it is when it has one).
StepMemory step_memories(const PlanRequest& rq, const PlanSpace& s, const PlanChoice& rest, std::string* refusal) {
  StepMemory m;
  for (const RecomputePolicy& r : s.recomputes) {
    m.of.emplace_back();
    for (int act = 0; act < 2; act++) {
      PlanChoice c = rest;
      c.recompute = r;
      c.offload.activations = act == 1;
      try {
        m.of.back()[act] = step_memory(c.apply(rq.base));
      } catch (const Error& x) {
        if (refusal->empty()) *refusal = x.what();
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

// The engine's half of the memory plan (empty: refused). It depends on the mesh, strategy, wrap, gather slots,
// reduce dtype, no-sync and offload of the states, not on B, recompute or sequence parallelism: one mesh's are
// kept across those, and each wrap's units are sized once.
class EngineMemories {
 public:
  explicit EngineMemories(const PlanRequest& rq) : rq_(rq) {}
  // c: strategy m.strategies[si], wrap m.wraps[wi]
  const std::optional<MemTotals>& get(const PlanChoice& c, size_t si, size_t wi, Enumerated& e) {
    const uint64_t k = ((uint64_t)si << 40) | ((uint64_t)wi << 24) | ((uint64_t)c.gather_slots << 8) |
                       ((uint64_t)(c.reduce == DType::BF16) << 4) | ((uint64_t)c.no_sync << 3) | (uint64_t)c.offload.states;
    auto it = of_.find(k);
    if (it != of_.end()) return it->second;
    if (numels_.size() <= wi) numels_.resize(wi + 1);
    std::optional<MemTotals> mem;
    try {
      const MemPlanInput in = c.apply(rq_.base);
      if (numels_[wi].empty()) numels_[wi] = unit_numels(in);
      mem = engine_memory(in, numels_[wi]);
    } catch (const Error& x) {
      if (e.refusal.empty()) e.refusal = x.what();
    }
    return of_.emplace(k, mem).first->second;
  }

 private:
  const PlanRequest& rq_;
  std::unordered_map<uint64_t, std::optional<MemTotals>> of_;
  std::vector<std::vector<int64_t>> numels_;  // per wrap
};

struct Fit {
  PlanCandidate c;
  size_t recompute;  // index into PlanSpace::recomputes: least work first
};

// j is provably no slower than i: no more recompute, a subset of the offloads, at least as many gather slots.
// Under tensor parallelism only the same gather slots and the same offload of the states: moving a gather or
// an optimizer's work moves the engine's collectives on the one channel, where the group's, waited at once,
// may then wait less (recompute and activation offload add work to the same program, and more work delays
// nothing's end less).
bool dominates(const Fit& j, const Fit& i) {
  const PlanChoice &a = j.c.choice, &b = i.c.choice;
  const bool same = j.recompute == i.recompute && a.offload.states == b.offload.states &&
                    a.offload.activations == b.offload.activations && a.gather_slots == b.gather_slots;
  const bool engine = a.tp.size > 1 ? a.gather_slots == b.gather_slots && a.offload.states == b.offload.states
                                    : a.gather_slots >= b.gather_slots;
  return !same && j.c.bound_s <= i.c.bound_s && j.recompute <= i.recompute && subset(a.offload, b.offload) && engine;
}

// One data-parallel rank with the states on the device gathers nothing and reduces nothing (resident
// parameters, direct gradients: geometry.h), so the gather slots change no op of its step, nor does the wrap
// without tensor parallelism (with it, the gradient norm sums the split and the whole tensors of each unit
// apart, and sequence parallelism all-reduces each unit's replicated gradients): every such candidate runs the
// program of the first wrap and slot count searched, which stands for them all.
bool same_program_as_another(const PlanSpace& s, const MeshSpace& m, const PlanChoice& c) {
  if (m.dp != 1 || c.offload.states != OffloadMode::none) return false;
  return (!(c.wrap == m.wraps.front()) && c.tp.size == 1) || c.gather_slots != s.slots.front();
}

// Where one rest of the space sits: its mesh, strategy and wrap (indices into the space), and its bounds and
// step memories (per recompute).
struct Rest {
  const MeshSpace* mesh;
  size_t strategy, wrap;
  const std::vector<StepBound>* bounds;
  const StepMemory* step;
};

// The (gather slots, recompute, offload) choices of one rest: which fit, and which of those no other dominates.
void add_rest(const PlanRequest& rq, const PlanSpace& s, const Rest& where, PlanChoice rest,
              const std::vector<int>& slots, EngineMemories& engines, Enumerated& e, PlanStats& st) {
  std::vector<Fit> fit;
  for (int k : slots) {
    rest.gather_slots = k;
    for (size_t r = 0; r < s.recomputes.size(); r++)
      for (const OffloadSet& o : s.offloads) {
        PlanCandidate c;
        c.choice = rest;
        c.choice.recompute = s.recomputes[r];
        c.choice.offload = o;
        if (same_program_as_another(s, *where.mesh, c.choice)) continue;
        st.space++;
        c.bound = (*where.bounds)[r];
        c.bound_s = c.bound.total();
        const std::optional<MemTotals>& stp = where.step->of[r][o.activations ? 1 : 0];
        const std::optional<MemTotals>& eng = stp ? engines.get(c.choice, where.strategy, where.wrap, e) : stp;
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
    if (rq.sample > 0) e.feasible.push_back(fit[i].c);
    if (fit[i].c.dominated_by)
      st.dominated++;
    else
      e.frontier.push_back(fit[i].c);
  }
}

// One (T, SP, B) of a mesh: the rest of the choice its candidates share, rule 4's bound per recompute and the
// step's memories, each made apart from the others (on threads: enumerate).
struct MicroBatch {
  const MeshSpace* mesh = nullptr;
  PlanChoice rest;                 // tp, B, accum; the mesh's first strategy, one gather slot
  std::vector<StepBound> bounds;   // [recompute]
  StepMemory step;
  std::string refusal;             // the engine's first refusal among the step's memories
};

MicroBatch micro_batch(const PlanRequest& rq, const MeshSpace& m, int B, bool sp) {
  MicroBatch mb;
  mb.mesh = &m;
  PlanChoice& rest = mb.rest;
  rest.tp = TpOptions{m.tp, sp};
  rest.B = B;
  rest.accum = m.seqs_per_rank / B;
  rest.strategy = m.strategies.empty() ? ShardStrategy::full : m.strategies[0].first;
  rest.shard_group = m.strategies.empty() ? 0 : m.strategies[0].second;
  rest.gather_slots = 1;
  return mb;
}

void measure_micro_batch(const PlanRequest& rq, const PlanSpace& s, const PlanBounds& bounds, MicroBatch& mb) {
  PlanChoice rest = mb.rest;
  for (const RecomputePolicy& r : s.recomputes) {
    rest.recompute = r;
    mb.bounds.push_back(bounds.of_key(*mb.mesh, rest));
  }
  mb.step = step_memories(rq, s, rest, &mb.refusal);
}

// Every (strategy, wrap, reduce dtype, no-sync) of one (T, SP, B).
void enumerate_micro_batch(const PlanRequest& rq, const PlanSpace& s, const MicroBatch& mb, EngineMemories& engines,
                           Enumerated& e, PlanStats& st) {
  const int L = rq.base.cfg.num_layers;
  const MeshSpace& m = *mb.mesh;
  if (e.refusal.empty()) e.refusal = mb.refusal;
  for (size_t si = 0; si < m.strategies.size(); si++)
    for (size_t wi = 0; wi < m.wraps.size(); wi++) {
      const WrapPolicy& w = m.wraps[wi];
      const int units = (int)w.groups(L, 1).size();
      std::vector<int> slots;  // more slots than units prefetch nothing more
      for (int k : s.slots)
        if (k <= std::max(1, units) || rq.pins.gather_slots) slots.push_back(k);
      for (DType red : m.reduces)
        for (bool ns : m.no_syncs) {
          if (ns && mb.rest.accum == 1 && !rq.pins.no_sync) continue;  // no-sync needs accumulation
          PlanChoice c = mb.rest;
          c.strategy = m.strategies[si].first, c.shard_group = m.strategies[si].second;
          c.wrap = w, c.reduce = red, c.no_sync = ns;
          add_rest(rq, s, Rest{&m, si, wi, &mb.bounds, &mb.step}, c, slots, engines, e, st);
        }
    }
}

// The micro-batches' bounds and memories first, on threads (each its own simulated steps), then every
// candidate in order.
Enumerated enumerate(const PlanRequest& rq, const PlanSpace& s, const PlanBounds& bounds, PlanStats& st) {
  std::vector<MicroBatch> mbs;
  for (const MeshSpace& m : s.meshes)
    for (int B : m.Bs)
      for (bool sp : m.sps) {
        // sequence parallelism splits the B*T rows over the group (a pin is left to the engine's check)
        if (sp && !sequence_parallel_fits(m.tp, B, rq.base.T) && !rq.pins.sequence_parallel) continue;
        mbs.push_back(micro_batch(rq, m, B, sp));
      }
  on_threads(mbs.size(), [&](size_t i) { measure_micro_batch(rq, s, bounds, mbs[i]); });
  st.bound_sims += (int64_t)(mbs.size() * s.recomputes.size());
  std::vector<std::pair<size_t, size_t>> meshes;  // [first, end) of each mesh's micro-batches
  for (size_t i = 0, j = 0; i < mbs.size(); i = j) {
    while (j < mbs.size() && mbs[j].mesh == mbs[i].mesh) j++;
    meshes.push_back({i, j});
  }
  // each mesh apart (its engines' memories its own), then merged in order: what one pass in order finds
  std::vector<Enumerated> of(meshes.size());
  std::vector<PlanStats> counted(meshes.size());
  on_threads(meshes.size(), [&](size_t k) {
    EngineMemories engines(rq);
    for (size_t i = meshes[k].first; i < meshes[k].second; i++)
      enumerate_micro_batch(rq, s, mbs[i], engines, of[k], counted[k]);
  });
  Enumerated e;
  for (size_t k = 0; k < of.size(); k++) {
    Enumerated& m = of[k];
    e.frontier.insert(e.frontier.end(), std::make_move_iterator(m.frontier.begin()),
                      std::make_move_iterator(m.frontier.end()));
    e.feasible.insert(e.feasible.end(), std::make_move_iterator(m.feasible.begin()),
                      std::make_move_iterator(m.feasible.end()));
    if (m.nearest_excess >= 0 && (e.nearest_excess < 0 || m.nearest_excess < e.nearest_excess))
      e.nearest = m.nearest, e.nearest_excess = m.nearest_excess;
    if (e.refusal.empty()) e.refusal = m.refusal;
    st.space += counted[k].space, st.no_fit += counted[k].no_fit, st.dominated += counted[k].dominated;
  }
  return e;
}

bool price(const PlanRequest& rq, PlanCandidate& c, PlanStats& st) {
  TimeModelInput t;
  t.run = c.choice.apply(rq.base);
  t.grad_accum = c.choice.accum;
  t.ranks_per_node = rq.ranks_per_node;
  t.threads_per_rank = rq.threads_per_rank;
  // its memory plan's halves were computed (and validated) by the enumeration; a saturated sum is not trusted
  t.memory_planned = c.device_need < INT64_MAX && c.host_need < INT64_MAX;
  st.priced++;
  try {
    c.time = plan_time(t, *rq.hw);
    return true;
  } catch (const Error&) {
    return false;
  }
}

// Rule 4's order priced a batch at a time: the candidates of one batch are chosen by the thresholds known
// when it starts, so a batch prices no fewer than one at a time would (the top K stay exact), and the batch is
// a fixed size, so what is priced, and so the report, is the same on any machine. Its simulated steps are
// independent (each builds its own model, engine and machine; the trace they isolate is per thread) and run
// on as many threads as this process's OpenMP allowance (OMP_NUM_THREADS, as a rank's kernels), at most the
// batch.
constexpr int kPriceBatch = 32;

// Prices each of `batch` on threads; ok[i] says whether the simulated step accepted it.
void price_batch(const PlanRequest& rq, const std::vector<PlanCandidate*>& batch, std::vector<char>& ok,
                 PlanStats& st) {
  ok.assign(batch.size(), 0);
  std::vector<PlanStats> each(batch.size());
  on_threads(batch.size(), [&](size_t i) { ok[i] = price(rq, *batch[i], each[i]); });
  for (const PlanStats& e : each) st.priced += e.priced;
}

bool faster(const PlanCandidate& a, const PlanCandidate& b) {
  if (a.time.step_s != b.time.step_s) return a.time.step_s < b.time.step_s;
  if (a.device_need != b.device_need) return a.device_need < b.device_need;  // equally fast: the smaller
  return a.choice.flags(1, 1) < b.choice.flags(1, 1);  // a fixed order for ties
}

// The K fastest priced so far, and with best_per_tp the fastest of each tensor-parallel size.
struct Ranking {
  int K;
  bool per_tp;
  std::vector<PlanCandidate> top;            // sorted, at most K
  std::map<int, PlanCandidate> fastest_of;   // T -> its fastest

  // The step a candidate must beat to matter (+inf while there is room).
  double threshold(int tp) const {
    double t = (int)top.size() < K ? INFINITY : top.back().time.step_s;
    if (per_tp) {
      const auto it = fastest_of.find(tp);
      t = std::max(t, it == fastest_of.end() ? INFINITY : it->second.time.step_s);
    }
    return t;
  }
  // The largest threshold of any size: no candidate whose bound reaches it matters.
  double any_threshold(const std::vector<MeshSpace>& meshes) const {
    double t = (int)top.size() < K ? INFINITY : top.back().time.step_s;
    for (const MeshSpace& m : meshes) t = std::max(t, threshold(m.tp));
    return t;
  }
  void add(const PlanCandidate& c) {
    top.insert(std::upper_bound(top.begin(), top.end(), c, faster), c);
    if ((int)top.size() > K) top.pop_back();
    auto it = fastest_of.find(c.choice.tp.size);
    if (it == fastest_of.end())
      fastest_of.emplace(c.choice.tp.size, c);
    else if (faster(c, it->second))
      it->second = c;
  }
};

// The next batch from frontier[i] by the thresholds now. A candidate whose rule 5 decision waits for a floor
// not measured yet counts as chosen and its floor goes to `missing`: the batch so chosen ends no later than the
// true one, so every floor it asks for is one the true choice asks for too.
struct BatchChoice {
  std::vector<PlanCandidate*> batch;
  size_t next = 0;  // where the choice stopped
  int64_t bounded = 0, by_channel = 0;
};

BatchChoice choose_batch(const Ranking& r, const PlanSpace& s, PlanBounds& bounds,
                         std::vector<PlanCandidate>& frontier, size_t i, PlanBounds::Missing& missing) {
  BatchChoice b;
  const double any = r.any_threshold(s.meshes);
  for (; i < frontier.size() && (int)b.batch.size() < kPriceBatch; i++) {
    PlanCandidate& c = frontier[i];
    if (c.bound_s >= any) {
      b.bounded += (int64_t)(frontier.size() - i);
      i = frontier.size();
      break;
    }
    const double need = r.threshold(c.choice.tp.size);
    if (c.bound_s >= need) {
      b.bounded++;
      continue;
    }
    bool reaches = false;
    if (need < INFINITY && bounds.channel_known(c, need, &reaches, missing) && reaches) {
      b.bounded++;
      b.by_channel++;
      continue;
    }
    b.batch.push_back(&c);
  }
  b.next = i;
  return b;
}

// Rules 4 and 5: the frontier priced in the order of rule 4's bound until it reaches the K-th best step found
// (and with best_per_tp, each size's fastest); a candidate whose rule 5 bound already does is not priced. Each
// batch's floors are measured on threads before it is chosen again from the same start, so the batches, and
// what is priced, are those of measuring each floor when first asked for.
Ranking price_in_bound_order(const PlanRequest& rq, const PlanSpace& s, PlanBounds& bounds,
                             std::vector<PlanCandidate>& frontier, PlanStats& st) {
  std::stable_sort(frontier.begin(), frontier.end(),
                   [](const PlanCandidate& a, const PlanCandidate& b) { return a.bound_s < b.bound_s; });
  Ranking r{rq.top, rq.best_per_tp, {}, {}};
  std::vector<char> ok;
  size_t i = 0;
  while (i < frontier.size()) {
    BatchChoice b;
    for (;;) {
      PlanBounds::Missing missing;
      b = choose_batch(r, s, bounds, frontier, i, missing);
      if (missing.empty()) break;
      bounds.measure(missing);
    }
    st.bounded += b.bounded;
    st.bounded_by_channel += b.by_channel;
    price_batch(rq, b.batch, ok, st);
    for (size_t k = 0; k < b.batch.size(); k++)
      if (ok[k]) r.add(*b.batch[k]);
    i = b.next;
  }
  GPT_CHECK(!r.top.empty(), "gpt plan: the simulated step refused every configuration that fits");
  return r;
}

std::vector<OtherTp> other_tp_sizes(const PlanRequest& rq, const PlanSpace& s,
                                    const std::vector<PlanCandidate>& frontier, const Ranking& ranked, int first_tp) {
  std::map<int, OtherTp> of;
  for (const PlanCandidate& c : frontier) {
    const int T = c.choice.tp.size;
    if (T == first_tp) continue;
    OtherTp& o = of[T];
    o.tp = T;
    if (o.candidates++ == 0 || c.bound_s < o.least_bound.total()) o.least_bound = c.bound;
    o.priced += c.time.step_s > 0;
  }
  std::vector<OtherTp> out;
  for (const MeshSpace& m : s.meshes) {
    if (!of.count(m.tp)) continue;
    OtherTp o = of.at(m.tp);
    if (ranked.fastest_of.count(m.tp)) o.fastest = ranked.fastest_of.at(m.tp);
    o.exact = rq.best_per_tp;
    out.push_back(o);
  }
  return out;
}

[[noreturn]] void nothing_fits(const PlanRequest& rq, const Enumerated& e) {
  const PlanBudget& b = rq.budget;
  const int64_t total = rq.total_batch;
  auto budget_text = [&] {
    return b.one_ram ? str(format_bytes(b.device), " of memory per rank")
                     : str(format_bytes(b.device), " device", b.host >= 0 ? ", " + format_bytes(b.host) + " host" : "",
                           " per rank");
  };
  GPT_CHECK(e.nearest_excess >= 0, "gpt plan: the engine accepts no configuration of the pinned flags",
            e.refusal.empty() ? std::string() : ": " + e.refusal);
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
  const PlanSpace s = make_plan_space(rq);
  PlanBounds bounds(rq, s, res.stats);
  Enumerated e = enumerate(rq, s, bounds, res.stats);
  if (e.frontier.empty()) nothing_fits(rq, e);
  for (const MeshSpace& m : s.meshes) res.tp_searched.push_back(m.tp);
  Ranking ranked = price_in_bound_order(rq, s, bounds, e.frontier, res.stats);
  res.top = ranked.top;
  res.other_tp = other_tp_sizes(rq, s, e.frontier, ranked, res.top[0].choice.tp.size);
  const std::vector<PlanCandidate>& best = res.top;
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

std::string why_slower(const PlanCandidate& best, const PlanCandidate& next, const std::string& next_name) {
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
  std::snprintf(buf, sizeof buf, " is %.2f%% slower than #1: %s %+.2f ms (%.2f -> %.2f ms per step)", pct, d[worst].name,
                1e3 * (d[worst].after - d[worst].before), 1e3 * d[worst].before, 1e3 * d[worst].after);
  return next_name + buf;
}

}  // namespace gpt
