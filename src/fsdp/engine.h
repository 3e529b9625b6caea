// The FSDP engine: owns this rank's shards of every unit (fp32 param, grad, Adam m and v), gathers a
// unit's full parameters when the model acquires it, frees them when it is released, and reduces each unit's
// full gradient into the grad shard as soon as it is ready. It implements ParamSource, so the model never
// sees ranks. What it allocates, and where model states live, is decided by its geometry (geometry.h).
//
// It composes three parts, each with its own state, rules and checks (their headers state the rules):
//   StateStore (state_store.h)  where the states live: the fp32 shards in one Backend (device, or host when
//                               offloaded), the device copies of the params, the offload copies and their
//                               tickets, and every buffer of the engine (engine_buffers.h)
//   ParamSide (param_side.h)    gather slots, gathers, prefetch, direct params / compute copy, and the order
//                               checks of acquire and release (the root unit's own slot)
//   GradSide (grad_side.h)      gradient slots, reductions (reduce-scatter, all-reduce, bf16, hybrid),
//                               --no-sync, and completion into the grad shards
// The engine itself owns the shard and replica communicators and the step's call order, and checks it.
// The gradient norm (grad_sumsq) sums every unit's grad shard in one Backend::sum_squares_all call: one host
// wait per step on cuda.
//
// The call order of a step, which the engine checks (a call out of order throws gpt::Error naming the unit):
//   begin_step()                        reshards what forward-only passes (eval, sample) left gathered,
//                                       zeroes the grad shards
//   per micro-step: begin_micro_step(last), the model's forward and backward (ParamSource calls, each pass
//                   acquiring units in Layout::pass_order; grad_buffer only for a unit held in backward)
//   finish_backward()                   every reduction done, grad shards complete
//   grad_sumsq(), update_params(...)    the optimizer; gathered copies of the old params are dropped
// Loading parameters (set_unit_from_host, shard_from_host) drops stale gathers and refreshes device copies
// by itself, so callers never resync the engine.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "src/backend/backend.h"
#include "src/dist/communicator.h"
#include "src/fsdp/geometry.h"
#include "src/fsdp/grad_side.h"
#include "src/fsdp/options.h"
#include "src/fsdp/param_side.h"
#include "src/fsdp/state_store.h"
#include "src/model/layout.h"
#include "src/model/param_source.h"

namespace gpt {

// ShardState and ShardSegment, which the transfers and update_params take, are state_store.h's.

class FsdpEngine : public ParamSource {
 public:
  FsdpEngine(Backend& be, Communicator& world, const Layout& layout, const FsdpOptions& opt);
  ~FsdpEngine() override;

  // ParamSource
  const void* acquire(int unit, Pass pass) override;
  void release(int unit, Pass pass) override;
  float* grad_buffer(int unit) override;
  void grad_ready(int unit) override;

  // The step (see the call order above).
  void begin_step();
  void begin_micro_step(bool last_micro_step);  // --no-sync needs to know when to reduce
  void finish_backward();                       // wait for every in-flight reduction (and host grad adds)
  double grad_sumsq();                          // global sum of squares of the reduced gradient
  // Runs `update` on every segment of every shard with the backend that holds the states, then drops the
  // gathered copies of the old parameters and refreshes the device copies (offload optimizer); the compute
  // copy is the update's to write (ShardSegment::param_out).
  void update_params(const std::function<void(Backend& states, const ShardSegment&)>& update);

  const Layout& layout() const { return layout_; }
  const FsdpOptions& options() const { return geo_.opt; }
  const EngineGeometry& geometry() const { return geo_; }
  int num_units() const { return (int)geo_.units.size(); }
  const UnitGeometry& shard(int unit) const { return geo_.units[unit]; }
  Communicator& world() { return world_; }
  int shard_group_size() const { return geo_.group; }
  // Traffic of the engine's collectives (shard group + replica group) since begin_traffic_step().
  CommCounters traffic_step() const;
  void begin_traffic_step();
  // Bytes of model states (param + grad + m + v shards, or param only for inference) this rank holds.
  int64_t model_state_bytes() const { return geo_.state_bytes_per_param() * geo_.shard_elems(); }

  // Whole-unit transfers (init, checkpoints, export). Collective where they say so.
  // The (full, unpadded) fp32 parameters of one unit on the host, gathered from the group (collective).
  std::vector<float> gather_unit_to_host(int unit);
  // Sets this rank's param shard of one unit from a full host copy.
  void set_unit_from_host(int unit, const float* full);
  // Host copies of this rank's shard of one unit (checkpoints, tests).
  void shard_to_host(int unit, ShardState which, std::vector<float>& out);
  void shard_from_host(int unit, ShardState which, const std::vector<float>& in);

 private:
  void trace_counters();  // slot occupancy and bytes in flight, for the trace's counter tracks
  void check_quiet(const char* what) const;  // nothing held, no gradient open or in flight, or throw
  void write_shard(int unit, ShardState which, const float* in /*(shard_numel)*/);  // shard_from_host's work

  Backend& be_;  // compute: gathers, gradients, everything the model touches
  Communicator& world_;
  Layout layout_;
  std::unique_ptr<Communicator> shard_comm_;    // ranks sharing a unit's shards (size G)
  std::unique_ptr<Communicator> replica_comm_;  // ranks holding the same shard (size N/G)
  EngineGeometry geo_;
  StateStore store_;  // first: the parts bind their buffers from it, and it frees them last
  ParamSide params_;
  GradSide grads_;
};

}  // namespace gpt
