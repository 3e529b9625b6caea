// ParamSource: who provides a unit's full parameters and takes its full gradient. The model asks for a
// unit right before it uses it and says when it is done; it never knows whether the unit was gathered from
// N shards or is the rank's own buffer (fsdp/engine.h does both). This is the seam that keeps the model
// rank-agnostic.
//
// Each pass acquires its units in Layout::pass_order (units: 0 = embed, 1..L = blocks, L+1 = head):
//   forward:  acquire(0) acquire(1) release(1) ... acquire(L+1) release(L+1) [LM head uses unit 0] release(0)
//   backward: acquire(0) [LM head] acquire(L+1) grad(L+1) release(L+1) grad_ready(L+1)
//             acquire(L) ... grad_ready(1)   [encoder] grad_ready(0) release(0)
// A unit's grad_buffer may be requested only between its backward acquire and grad_ready. The FSDP engine
// checks this order and throws on a call out of it.
#pragma once

#include "src/model/layout.h"

namespace gpt {

class ParamSource {
 public:
  virtual ~ParamSource() = default;
  // Full parameters of unit u in the backend's compute dtype, ready for use (waits for its gather).
  virtual const void* acquire(int unit, Pass pass) = 0;
  // The model is done with unit u's parameters for this pass.
  virtual void release(int unit, Pass pass) = 0;
  // Full-unit fp32 gradient buffer (numel of the unit) that backward accumulates (+=) into.
  virtual float* grad_buffer(int unit) = 0;
  // Unit u's gradient for this micro-batch is complete (FSDP starts its reduce-scatter here).
  virtual void grad_ready(int unit) = 0;
};

}  // namespace gpt
