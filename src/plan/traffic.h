// The communication a run should cause, predicted before it starts (the start-up report's traffic line):
// a pure function of the model size, world size, strategy, shard-group size and element types, from the
// ring accounting of dist/comm_volume.h, with Psi = all parameters (Layout::total_numel):
//   none (DDP)       per step: one all-reduce of the gradients, 2*Psi*(N-1)/N elements of the reduce dtype;
//   full / grad_op / hybrid, per micro-step, approximately: 2 (full) or 1 all-gathers of the parameters in
//                    the compute dtype plus 1 reduce-scatter of the gradients in the reduce dtype, each of
//                    Psi*(G-1)/G elements (hybrid's cross-group all-reduce of grad shards and the root
//                    unit's single gather are left out: hence "~").
// The ledgers measure the exact figures (tests/fsdp/test_fsdp_ledgers.cpp holds them to the formulas).
#pragma once
#include <cstdint>
#include <string>

#include "src/core/dtype.h"
#include "src/fsdp/options.h"
#include "src/model/layout.h"

namespace gpt {

struct TrafficPrediction {
  ShardStrategy strategy = ShardStrategy::full;
  double gathers = 0;     // all-gathers of the parameters per micro-step (0 for none)
  int64_t bytes = 0;      // per rank: per step for none, per micro-step otherwise
  std::string describe() const;  // the start-up report's line
};

// world N ranks, group G = the shard-group size the engine uses (N for full and grad_op, 1 for none);
// compute: the dtype parameters are gathered in.
TrafficPrediction predict_traffic(const Layout& layout, const FsdpOptions& fsdp, int world, int group, DType compute);

}  // namespace gpt
