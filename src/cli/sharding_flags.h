// The flags that say how a run is sharded and what each rank keeps: --tp --sequence-parallel --engine --shard
// --shard-group --gather-slots --no-sync --offload --reduce-dtype --recompute --wrap, parsed in one place for gpt train,
// gpt bench and gpt memplan. Their combinations are checked by the rules that use them: what needs no world
// size at once (EngineGeometry::options_check_flags), the rest against the world (EngineGeometry::options_check).
#pragma once
#include "src/cli/flags.h"
#include "src/fsdp/options.h"
#include "src/model/recompute.h"
#include "src/model/tp_shape.h"
#include "src/model/wrap.h"

namespace gpt {

struct ShardingFlags {
  TpOptions tp;                      // --tp, --sequence-parallel
  FsdpOptions fsdp;                  // --engine --shard --shard-group --gather-slots --no-sync --reduce-dtype,
                                     // and --offload's states
  bool offload_activations = false;  // --offload ...,activations
  RecomputePolicy recompute;         // --recompute
  WrapPolicy wrap;                   // --wrap
};

ShardingFlags parse_sharding_flags(Flags& f);

// The flags into a run's options (TrainOptions, MemPlanInput: the fields of the same names).
template <class Run>
void parse_sharding_flags(Flags& f, Run& run) {
  const ShardingFlags s = parse_sharding_flags(f);
  run.fsdp = s.fsdp;
  run.tp = s.tp;
  run.offload_activations = s.offload_activations;
  run.recompute = s.recompute;
  run.wrap = s.wrap;
}

}  // namespace gpt
