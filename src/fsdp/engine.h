// The full FSDP engine: NaiveEngine's arithmetic (naive_engine.h), scheduled. Read the naive one first; this
// one computes the same bits with the collectives overlapped and the states where the options put them.
// It is a small core with the options applied as layers, each chosen once, at construction, for the geometry
// (engine.cpp: choose_*):
//   StateStore (state_store.h)   where the fp32 states live (device, or host when offloaded), their device
//                                copies, the offload copies, and every buffer of the engine (engine_buffers.h)
//   ParamSupply (engine_parts.h) acquire and release: ParamSide (param_side.h: gather slots, unshard, wait,
//                                prefetch, reshard) over a ShardSource (shard_source.h: the shard on the
//                                device, its offloaded copy, or its upload), or ResidentParams (resident.h)
//   GradSink (engine_parts.h)    grad_buffer and grad_ready: GradSide (grad_side.h: gradient slots and
//                                overlapped reductions) over a GradReducer (grad_reducer.h: fp32 or bf16,
//                                hybrid), NoSyncGrads (grad_nosync.h), or DirectGrads (resident.h)
//   StepOrder (step_order.h)     the ParamSource protocol, checked on every call before the parts act
// The engine itself owns the shard and replica communicators and the step's moments (sharding_engine.h
// states their order).
// Loading parameters (set_unit_from_host, shard_from_host) drops stale gathers and refreshes device copies
// by itself, so callers never resync the engine.
#pragma once
#include <memory>
#include <vector>

#include "src/fsdp/engine_parts.h"
#include "src/fsdp/shard_source.h"
#include "src/fsdp/sharding_engine.h"
#include "src/fsdp/state_store.h"
#include "src/fsdp/step_order.h"

namespace gpt {

class FsdpEngine : public ShardingEngine {
 public:
  FsdpEngine(Backend& be, Communicator& world, const Layout& layout, const FsdpOptions& opt);
  ~FsdpEngine() override;

  // ParamSource: checked (StepOrder), then the parts.
  const void* acquire(int unit, Pass pass) override;
  void release(int unit, Pass pass) override;
  float* grad_buffer(int unit) override;
  void grad_ready(int unit) override;

  void begin_step() override;  // also reshards what forward-only passes (eval, sample) left gathered
  void begin_micro_step(bool last_micro_step) override { grads_->begin_micro_step(last_micro_step); }
  void finish_backward() override;
  // Every unit's grad shard in one Backend::sum_squares_all call (one host wait per step on cuda).
  double grad_sumsq() override;
  double grad_sumsq(const TensorFilter& counted) override;
  // Also drops the gathered copies of the old parameters and refreshes the device copies (offload
  // optimizer); the compute copy is the update's to write (ShardSegment::param_out).
  void update_params(const SegmentUpdate& update) override;

  const Layout& layout() const override { return layout_; }
  const EngineGeometry& geometry() const override { return geo_; }
  Communicator& world() override { return world_; }
  CommCounters traffic_step() const override;  // the shard group's and the replica group's
  void begin_traffic_step() override;

  std::vector<float> gather_unit_to_host(int unit) override;
  void set_unit_from_host(int unit, const float* full) override;
  void shard_to_host(int unit, ShardState which, std::vector<float>& out) override;
  void shard_from_host(int unit, ShardState which, const std::vector<float>& in) override;

 private:
  std::unique_ptr<ParamSupply> choose_param_supply();
  std::unique_ptr<GradSink> choose_grad_sink();
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
  StepOrder order_;
  std::unique_ptr<ShardSource> source_;  // the gather side's input (null with resident params)
  std::unique_ptr<ParamSupply> params_;
  std::unique_ptr<GradSink> grads_;
};

}  // namespace gpt
