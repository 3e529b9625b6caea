// The two seams inside the full engine (engine.h), each filled once for the geometry:
//   ParamSupply  what acquire and release do:   ParamSide (param_side.h: gather, wait, prefetch, free), or
//                                                ResidentParams (resident.h: one rank's own buffers, nothing to gather)
//   GradSink     what grad_buffer and grad_ready do:  GradSide (grad_side.h: gradient slots and reductions;
//                                                NoSyncGrads for --no-sync), or DirectGrads (resident.h: one rank
//                                                accumulates straight into its grad shards, nothing to reduce)
// The engine checks the call order (step_order.h) before it calls them, so they take it as given.
#pragma once
#include "src/model/layout.h"

namespace gpt {

class ParamSupply {
 public:
  virtual ~ParamSupply() = default;
  virtual const void* acquire(int u, Pass pass) = 0;  // u's full parameters (compute dtype), valid until release
  virtual void release(int u, Pass pass) = 0;
  virtual void reload(int u) = 0;  // u's parameters were rewritten: a gather of the old ones is dropped
  virtual void free_all() = 0;     // every unit sharded again
  virtual double bytes_in_use() const = 0;  // gathered parameters held (the trace's counter)
};

class GradSink {
 public:
  virtual ~GradSink() = default;
  // The fp32 full-unit buffer backward accumulates u's gradient into; `opens`: the first call since u's grad_ready.
  virtual float* grad_buffer(int u, bool opens) = 0;
  virtual void grad_ready(int u) = 0;  // u's gradient for this micro-step is complete
  virtual void begin_micro_step(bool last_micro_step) {}
  virtual void finish() = 0;             // every reduction added into the grad shards
  virtual bool in_flight() const = 0;    // a reduction has started and not been added yet
  virtual double bytes_in_use() const = 0;  // gradient slots held (the trace's counter)
};

}  // namespace gpt
