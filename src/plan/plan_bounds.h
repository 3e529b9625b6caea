// The lower bounds `gpt plan`'s search prices candidates in the order of, and stops by (plan_search.h, rules 4
// and 5). Each comes from simulated steps, never from a formula of the schedule:
//  - rule 4, per (T, SP, recompute, B): the model's compute, the same whatever the engine does, and on a gpu
//    file the tensor-parallel group's collectives, from one micro-step of the mesh's single data-parallel rank,
//    then the step's scalar reductions of the loss and the gradient norm;
//  - rule 5, per engine (T, strategy, G, reduce dtype, no-sync, wrap) and accumulation: every collective runs on
//    one channel, so a step lasts at least the group's collectives plus the larger of the compute and the
//    engine's collectives, from simulated steps of one and two micro-steps (the last micro-step's, and each
//    earlier one's) scaled to the accumulation; the coarsest wrap's, no larger than any wrap's, is tried first.
//    With one gather slot the engine's all-gathers idle the compute stream too: at least the group's
//    collectives plus the compute plus the all-gathers, from the same steps. Under TP, at least the group's
//    collectives plus the compute plus (the engine's collectives less their count x the longest stretch of
//    compute between two of the group's waits), from the wrap's own floor and rule 4's micro-step.
#pragma once
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "src/plan/plan_search.h"
#include "src/plan/plan_space.h"

namespace gpt {

// Runs work(i) for i in [0, n) on as many threads as this process's OpenMP allowance (OMP_NUM_THREADS, as a
// rank's kernels), at most n; rethrows the first failure by index. Each call must be independent of the others.
void on_threads(size_t n, const std::function<void(size_t)>& work);

class PlanBounds {
 public:
  PlanBounds(const PlanRequest& rq, const PlanSpace& s, PlanStats& stats) : rq_(rq), s_(s), st_(stats) {}

  // Rule 4's bound for every candidate of c's (T, SP, recompute, B) in mesh m (one simulated step; safe on
  // threads, and counted by the caller in PlanStats::bound_sims).
  StepBound of_key(const MeshSpace& m, PlanChoice c) const;
  // Rule 5's bound for c (0 where the group's collectives are not counted apart), computing its engine's floor
  // the first time it is asked for.
  double channel(const PlanCandidate& c);
  // Whether rule 5's bound reaches `step`: the coarsest wrap's floor tried first (no larger than any wrap's).
  bool channel_reaches(const PlanCandidate& c, double step);
  // The same decision without measuring: false when a floor it needs is not measured yet (then that floor is
  // added to `missing`, once), else true with *reaches set as channel_reaches would.
  struct Missing;
  bool channel_known(const PlanCandidate& c, double step, bool* reaches, Missing& missing);
  // Measures the floors in `missing` (their simulated steps on threads) and empties it.
  void measure(Missing& missing);
  // The least seconds of the engine's collectives in a step of c's engine and accumulation under `wrap`
  // (-1: not known).
  double engine_floor(const PlanChoice& c, const WrapPolicy& wrap);

 private:
  using FloorKey = std::tuple<int, int, int, int, bool, std::string>;  // (T, strategy, G, reduce, no-sync, wrap)
  // The engine's collectives in a step or micro-step: all of them (-1: not measured, not counted or refused),
  // and of those the all-gathers.
  struct EngineSeconds {
    double comm = -1, gathers = 0;
    double calls = 0;  // how many of them (a count, scaled as the seconds are)
  };
  struct Floor {
    EngineSeconds last;          // the last micro-step's
    EngineSeconds each_earlier;  // each earlier one's
    bool refused_last = false, refused_earlier = false;  // the engine refuses that step: the floor's candidates
                                                          // are priced (and refused) one by one
  };
  static FloorKey floor_key(const PlanChoice& c, const WrapPolicy& wrap);
  bool counts_tp(int tp) const;
  double scalars(int tp) const;
  TimePlan floor_step(const PlanChoice& c, const WrapPolicy& wrap, int accum) const;
  // c's floor under `wrap` (a step of its accumulation), or nullopt while a measurement it needs is missing
  std::optional<EngineSeconds> floor_if_known(const PlanChoice& c, const WrapPolicy& wrap, Missing* missing);
  // own: `wrap` is c's own (the stretch term holds only there)
  std::optional<double> channel_if_known(const PlanCandidate& c, const WrapPolicy& wrap, bool own, Missing* missing);

  const PlanRequest& rq_;
  const PlanSpace& s_;
  PlanStats& st_;
  std::map<FloorKey, Floor> floors_;
  std::map<int, double> tp_micro_;  // T -> the group's seconds in one micro-step of the floors' steps
};

// The floors a batch's decisions wait for (PlanBounds::channel_known).
struct PlanBounds::Missing {
  struct Need {
    PlanChoice choice;  // its engine (T, strategy, G, reduce dtype, no-sync)
    WrapPolicy wrap;
    int accum;          // 1: the last micro-step's floor; 2: also each earlier one's
  };
  std::vector<Need> needs;
  std::map<FloorKey, size_t> at;  // key -> its index in needs
  bool empty() const { return needs.empty(); }
};

}  // namespace gpt
