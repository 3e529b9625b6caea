// One rank's resident paths: with a shard group of one rank (G = 1) and the states on the device, the shard
// is the whole unit and nothing is gathered or reduced; the engine picks these parts once (engine.cpp).
//   ResidentParams  acquire returns a buffer the unit always has: the fp32 master shard itself when the model
//                   computes in fp32 (direct params), else the unit's compute copy, a persistent bf16 copy that
//                   AdamW writes in the same pass as the master (StateStore::device_copy, EngineGeometry's
//                   compute_copy). No slot, no conversion per acquire.
//   DirectGrads     one rank and no offload: backward accumulates straight into the grad shards (world = 1,
//                   so the mean over ranks is the sum itself).
#pragma once
#include <vector>

#include "src/fsdp/engine_parts.h"
#include "src/fsdp/state_store.h"

namespace gpt {

class ResidentParams : public ParamSupply {
 public:
  ResidentParams(const EngineGeometry& geo, StateStore& store);
  const void* acquire(int u, Pass) override { return unit_[u]; }
  void release(int, Pass) override {}
  void reload(int) override {}  // the store refreshes the compute copy when the master changes
  void free_all() override {}
  double bytes_in_use() const override { return 0; }

 private:
  std::vector<const void*> unit_;  // [unit]: what the model reads (padded, the compute dtype)
};

class DirectGrads : public GradSink {
 public:
  explicit DirectGrads(StateStore& store) : store_(store) {}
  float* grad_buffer(int u, bool) override { return store_.grad(u); }
  void grad_ready(int) override {}
  void finish() override {}
  bool in_flight() const override { return false; }
  double bytes_in_use() const override { return 0; }

 private:
  StateStore& store_;
};

}  // namespace gpt
