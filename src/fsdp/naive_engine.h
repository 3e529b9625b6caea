// The naive sharding engine: FULL_SHARD with nothing in the way. Read it first (docs/reading.md, stop 4).
//
// Each rank owns one contiguous slice of every unit's flat parameters (EngineGeometry: the unit padded to a
// multiple of N, slice r to rank r) and keeps four fp32 states of it: the parameters, their gradient, and
// Adam's m and v. A unit's full parameters exist only while the model holds it:
//   acquire(u)      all-gather every rank's slice into a new buffer, and wait for it
//   release(u)      free that buffer (--shard grad_op keeps forward's until backward releases the unit)
//   grad_buffer(u)  a new zeroed fp32 buffer of the whole unit, which backward accumulates into
//   grad_ready(u)   reduce-scatter it (rank r receives the sum over ranks of slice r), wait, add sum / N into
//                   the grad shard, free the buffer
// AdamW then updates each rank's slice on its own (update_params); the one number the ranks share for it is
// the gradient norm (grad_sumsq). --shard none (DDP) is the same with one slice, the whole unit: acquire is
// a copy and grad_ready an all-reduce.
//
// Nothing overlaps and nothing is kept around: no prefetch, no gather slots, no offload, bf16 reductions,
// hybrid groups or --no-sync. The full engine (engine.h) is this arithmetic scheduled, with those options
// as layers around it; the two compute the same bits (tests/fsdp/test_naive_engine.cpp).
#pragma once
#include <vector>

#include "src/fsdp/sharding_engine.h"

namespace gpt {

class NaiveEngine : public ShardingEngine {
 public:
  // Throws a one-line error naming the first option it has no code for.
  NaiveEngine(Backend& be, Communicator& world, const Layout& layout, const FsdpOptions& opt);
  ~NaiveEngine() override;

  // ParamSource: the protocol above.
  const void* acquire(int unit, Pass pass) override;
  void release(int unit, Pass pass) override;
  float* grad_buffer(int unit) override;
  void grad_ready(int unit) override;

  void begin_step() override;
  void begin_micro_step(bool) override {}
  void finish_backward() override {}  // grad_ready waited for every reduction already
  double grad_sumsq() override { return grad_sumsq(TensorFilter()); }
  double grad_sumsq(const TensorFilter& counted) override;  // every tensor when `counted` is empty
  void update_params(const SegmentUpdate& update) override;

  const Layout& layout() const override { return layout_; }
  const EngineGeometry& geometry() const override { return geo_; }
  Communicator& world() override { return world_; }
  CommCounters traffic_step() const override { return world_.ledger().step(); }
  void begin_traffic_step() override { world_.ledger().begin_step(); }

  std::vector<float> gather_unit_to_host(int unit) override;
  void shard_to_host(int unit, ShardState which, std::vector<float>& out) override;
  void shard_from_host(int unit, ShardState which, const std::vector<float>& in) override;

 private:
  struct Unit {
    float *param = nullptr, *grad = nullptr, *m = nullptr, *v = nullptr;  // (shard) fp32: this rank's states
    void* full = nullptr;        // (padded) compute dtype: the gathered parameters while acquired
    float* full_grad = nullptr;  // (padded) fp32: the gradient backward accumulates, until grad_ready
  };
  void free_full(Unit& x);
  float* state(int u, ShardState which);

  Backend& be_;
  Communicator& world_;  // the shard group: every rank (full, grad_op), or none of the others (G = 1)
  Layout layout_;
  EngineGeometry geo_;
  std::vector<Unit> units_;
};

}  // namespace gpt
