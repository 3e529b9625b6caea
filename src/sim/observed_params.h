// A ParamSource in front of the FSDP engine that only watches: it tells the sim backend which unit's ops
// follow (the per-unit table) and notes, after each acquire, how many all-gathers are in flight beyond the
// unit (the prefetch depth the engine really reached). Every call goes to the engine unchanged, so the
// schedule is still the engine's alone.
#pragma once
#include <vector>

#include "src/dist/communicator.h"
#include "src/model/param_source.h"
#include "src/sim/sim_backend.h"
#include "src/sim/sim_comm.h"

namespace gpt::sim {

class ObservedParams : public ParamSource {
 public:
  ObservedParams(ParamSource& engine, SimBackend& be, Communicator& world) : engine_(engine), be_(be), world_(world) {}
  const void* acquire(int unit, Pass pass) override {
    const void* p = engine_.acquire(unit, pass);
    held_.push_back(unit);
    be_.set_unit(unit);
    gathers_ahead_.push_back(sim_gathers_in_flight(world_));
    return p;
  }
  void release(int unit, Pass pass) override {
    engine_.release(unit, pass);
    for (size_t i = held_.size(); i-- > 0;)
      if (held_[i] == unit) {
        held_.erase(held_.begin() + (long)i);
        break;
      }
    be_.set_unit(held_.empty() ? -1 : held_.back());  // the LM head runs in the root unit after head's release
  }
  float* grad_buffer(int unit) override { return engine_.grad_buffer(unit); }
  void grad_ready(int unit) override { engine_.grad_ready(unit); }
  // Per acquire, in call order: all-gathers in flight once the acquire returned.
  const std::vector<int>& gathers_ahead() const { return gathers_ahead_; }

 private:
  ParamSource& engine_;
  SimBackend& be_;
  Communicator& world_;
  std::vector<int> held_;
  std::vector<int> gathers_ahead_;
};

}  // namespace gpt::sim
