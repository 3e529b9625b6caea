// The lower bounds `gpt plan`'s search prices candidates in the order of, and stops by (plan_search.h, rules 4
// and 5). Each comes from simulated steps, never from a formula of the schedule:
//  - rule 4, per (T, SP, recompute, B): the model's compute, the same whatever the engine does, and on a gpu
//    file the tensor-parallel group's collectives, from one micro-step of the mesh's single data-parallel rank,
//    then the step's scalar reductions of the loss and the gradient norm;
//  - rule 5, per engine (T, strategy, G, reduce dtype, no-sync, wrap) and accumulation: every collective runs on
//    one channel, so a step lasts at least the group's collectives plus the larger of the compute and the
//    engine's collectives, from simulated steps of one and two micro-steps (the last micro-step's, and each
//    earlier one's) scaled to the accumulation; the coarsest wrap's, no larger than any wrap's, is tried first.
#pragma once
#include <map>
#include <string>
#include <tuple>

#include "src/plan/plan_search.h"
#include "src/plan/plan_space.h"

namespace gpt {

class PlanBounds {
 public:
  PlanBounds(const PlanRequest& rq, const PlanSpace& s, PlanStats& stats) : rq_(rq), s_(s), st_(stats) {}

  // Rule 4's bound for every candidate of c's (T, SP, recompute, B) in mesh m (one simulated step).
  StepBound of_key(const MeshSpace& m, PlanChoice c);
  // Rule 5's bound for c (0 where the group's collectives are not counted apart), computing its engine's floor
  // the first time it is asked for.
  double channel(const PlanCandidate& c);
  // Whether rule 5's bound reaches `step`: the coarsest wrap's floor tried first (no larger than any wrap's).
  bool channel_reaches(const PlanCandidate& c, double step);
  // The least seconds of the engine's collectives in a step of c's engine and accumulation under `wrap`
  // (-1: not known).
  double engine_floor(const PlanChoice& c, const WrapPolicy& wrap);

 private:
  struct Floor {
    double last = -1;          // the last micro-step's (-1: not measured yet)
    double each_earlier = -1;  // each earlier one's
  };
  bool counts_tp(int tp) const;
  double scalars(int tp) const;
  double floor_step(const PlanChoice& c, const WrapPolicy& wrap, int accum);
  double channel_at(const PlanCandidate& c, const WrapPolicy& wrap);

  const PlanRequest& rq_;
  const PlanSpace& s_;
  PlanStats& st_;
  std::map<std::tuple<int, int, int, int, bool, std::string>, Floor> floors_;  // (T, strategy, G, reduce, no-sync, wrap)
  std::map<int, double> tp_micro_;  // T -> the group's seconds in one micro-step of the floors' steps
};

}  // namespace gpt
