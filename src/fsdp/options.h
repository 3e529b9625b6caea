// FSDP options: the sharding strategy and the knobs that trade memory for traffic or speed.
//   full     ZeRO-3 / FULL_SHARD: params, grads and optimizer state sharded; a unit is gathered for its
//            forward, freed, gathered again for its backward, and its gradient is reduce-scattered.
//   grad_op  ZeRO-2 / SHARD_GRAD_OP: like full, but forward's gather is kept until backward (one gather).
//   none     DDP / NO_SHARD: every rank holds everything; gradients are all-reduced.
//   hybrid   HYBRID_SHARD: full sharding inside groups of G ranks, gradient shards all-reduced across
//            the N/G groups.
// Offload (where the fp32 master shard, grad shard and Adam state live):
//   none       on the device
//   optimizer  on the host, AdamW runs on the host; the device keeps a compute-dtype copy of the param
//              shard so a gather needs no host copy (the ZeRO-Offload split)
//   params     as optimizer, and nothing of the model states stays on the device between uses: every
//              gather first copies the shard host -> device into a staging buffer
// Reduce dtype (the element type gradients travel in; master weights, grad shards and Adam stay fp32):
//   fp32       the full-unit fp32 gradient is reduce-scattered (all-reduced) as it is
//   bf16       it is rounded to bf16 (nearest-even) into a send buffer, reduced in bf16 (every partial
//              sum rounded to bf16), and the bf16 result is widened to fp32 before it is added to the
//              grad shard: half the gradient bytes on the wire. With one rank nothing is communicated,
//              so nothing is rounded either.
#pragma once
#include <string>

#include "src/core/dtype.h"

namespace gpt {

enum class ShardStrategy { full, grad_op, none, hybrid };
// --engine: which engine runs the strategy (sharding_engine.h). naive: NaiveEngine, every collective waited for
// in full, for reading and as the reference the full engine is held to bit for bit; full: FsdpEngine.
enum class EngineKind { full, naive };
enum class OffloadMode { none, optimizer, params };

struct FsdpOptions {
  EngineKind engine = EngineKind::full;          // --engine
  ShardStrategy strategy = ShardStrategy::full;  // --shard
  int shard_group = 0;     // --shard-group G for hybrid (must divide the world size)
  int gather_slots = 2;    // --gather-slots K: non-root units unsharded at once (current + prefetched)
  bool no_sync = false;    // --no-sync: accumulate full grads locally, reduce on the last micro-step
  OffloadMode offload = OffloadMode::none;  // --offload
  DType reduce_dtype = DType::F32;  // --reduce-dtype: element type of the gradient reductions
  // gpt eval and gpt sample: the engine holds the parameters only (no gradient or Adam state, no gradient
  // slots), 4 bytes per owned parameter instead of 16; a backward or an optimizer step on it throws.
  bool inference = false;

  static EngineKind parse_engine(const std::string& s);       // throws naming --engine
  static ShardStrategy parse_strategy(const std::string& s);  // throws naming --shard
  static OffloadMode parse_offload(const std::string& s);     // throws naming --offload
  static DType parse_reduce_dtype(const std::string& s);      // throws naming --reduce-dtype
  static const char* name(EngineKind e);
  static const char* name(ShardStrategy s);
  static const char* name(OffloadMode m);
  static const char* reduce_dtype_name(DType d);  // "fp32" or "bf16", as the flag spells them
};

}  // namespace gpt
