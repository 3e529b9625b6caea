// The lower bounds `gpt plan`'s search prices candidates in the order of, and stops by (plan_search.h, rules 4
// and 5). Each comes from simulated steps, never from a formula of the schedule:
//  - rule 4, per (T, SP, recompute, B): the model's compute, the same whatever the engine does, and on a gpu
//    file the tensor-parallel group's collectives, from one micro-step of the mesh's single data-parallel rank,
//    then the step's scalar reductions of the loss and the gradient norm;
//  - rule 5, per engine (T, strategy, G, reduce dtype, no-sync) and accumulation: every collective runs on one
//    channel, so a step lasts at least the group's collectives plus the larger of the compute and the engine's
//    collectives; those are bounded below by the coarsest wrap's, from simulated steps of one and two
//    micro-steps (the last micro-step's, and each earlier one's), scaled to the accumulation.
#pragma once
#include <map>
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
  // The least seconds of the engine's collectives in a step of c's engine and accumulation (-1: not known).
  double engine_floor(const PlanChoice& c);

 private:
  struct Floor {
    double last = -1;          // the last micro-step's (-1: not measured yet)
    double each_earlier = -1;  // each earlier one's
  };
  bool counts_tp(int tp) const;
  double scalars(int tp) const;
  double floor_step(const PlanChoice& c, int accum);

  const PlanRequest& rq_;
  const PlanSpace& s_;
  PlanStats& st_;
  std::map<std::tuple<int, int, int, int, bool>, Floor> floors_;  // (T, strategy, G, reduce, no-sync)
  std::map<int, double> tp_micro_;  // T -> the group's seconds in one micro-step of the floors' steps
};

}  // namespace gpt
