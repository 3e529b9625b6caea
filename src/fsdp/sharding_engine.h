// What a trainer needs of a sharding engine besides the ParamSource the model draws on: the moments of a
// step, the optimizer's view of this rank's shards, and whole-unit transfers for init, checkpoints and
// export. Two engines implement it:
//   NaiveEngine (naive_engine.h)  the protocol and nothing else: every gather and reduction waited for in full.
//                                 Read it first.
//   FsdpEngine (engine.h)         the same arithmetic, scheduled: gather slots and prefetch, overlapped
//                                 reductions, offload, bf16, hybrid, --no-sync.
// They produce the same bits (tests/fsdp/test_naive_engine.cpp), so the full engine is the naive one plus
// scheduling and options.
//
// The call order of a step (FsdpEngine checks it; a call out of order throws gpt::Error naming the unit):
//   begin_step()                        every unit sharded, the grad shards zeroed
//   per micro-step: begin_micro_step(last), the model's forward and backward (ParamSource calls)
//   finish_backward()                   every reduction done, the grad shards complete
//   grad_sumsq(), update_params(...)    the optimizer on this rank's shards
#pragma once
#include <cstdint>
#include <vector>

#include "src/backend/backend.h"
#include "src/dist/communicator.h"
#include "src/fsdp/geometry.h"
#include "src/fsdp/shards.h"
#include "src/model/layout.h"
#include "src/model/param_source.h"

namespace gpt {

class ShardingEngine : public ParamSource {
 public:
  // The step (see the call order above).
  virtual void begin_step() = 0;
  virtual void begin_micro_step(bool last_micro_step) = 0;
  virtual void finish_backward() = 0;                       // every reduction added into the grad shards
  virtual double grad_sumsq() = 0;                          // global sum of squares of the reduced gradient
  // The same over the tensors `counted` accepts only (tensor parallelism counts its split and its replicated
  // tensors apart: src/train/train_step.cpp).
  virtual double grad_sumsq(const TensorFilter& counted) = 0;
  // Runs `update` on every segment of this rank's shards (shards.h), with the backend holding the states.
  virtual void update_params(const SegmentUpdate& update) = 0;

  // What it shards, over whom.
  virtual const Layout& layout() const = 0;
  virtual const EngineGeometry& geometry() const = 0;  // shard group, padding, this rank's slices
  virtual Communicator& world() = 0;
  // Traffic of the engine's collectives since begin_traffic_step().
  virtual CommCounters traffic_step() const = 0;
  virtual void begin_traffic_step() = 0;

  // Whole-unit transfers (init, checkpoints, export). Collective where they say so.
  // The (full, unpadded) fp32 parameters of one unit on the host, gathered from the group (collective).
  virtual std::vector<float> gather_unit_to_host(int unit) = 0;
  // Host copies of this rank's shard of one unit (checkpoints, tests).
  virtual void shard_to_host(int unit, ShardState which, std::vector<float>& out) = 0;
  virtual void shard_from_host(int unit, ShardState which, const std::vector<float>& in) = 0;
  // Sets this rank's param shard of one unit from a full host copy (unit numel floats).
  virtual void set_unit_from_host(int unit, const float* full);

  const FsdpOptions& options() const { return geometry().opt; }
  int num_units() const { return (int)geometry().units.size(); }
  const UnitGeometry& shard(int unit) const { return geometry().units[unit]; }
  int shard_group_size() const { return geometry().group; }
  // Bytes of model states (param + grad + m + v shards, or param only for inference) this rank holds.
  int64_t model_state_bytes() const { return geometry().state_bytes_per_param() * geometry().shard_elems(); }
};

// The whole unit on the host from every rank's shard `mine` (shard_numel floats): gathered over `group`, the
// ranks that share the unit's shards (collective on them), unless this rank owns all of it; cut to its numel.
std::vector<float> gather_shards_to_host(Backend& be, Communicator& group, const UnitGeometry& g,
                                         const std::vector<float>& mine, const std::string& label);

}  // namespace gpt
