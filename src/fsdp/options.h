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
#pragma once
#include <string>

namespace gpt {

enum class ShardStrategy { full, grad_op, none, hybrid };
enum class OffloadMode { none, optimizer, params };

struct FsdpOptions {
  ShardStrategy strategy = ShardStrategy::full;  // --shard
  int shard_group = 0;     // --shard-group G for hybrid (must divide the world size)
  int gather_slots = 2;    // --gather-slots K: non-root units unsharded at once (current + prefetched)
  bool no_sync = false;    // --no-sync: accumulate full grads locally, reduce on the last micro-step
  OffloadMode offload = OffloadMode::none;  // --offload

  static ShardStrategy parse_strategy(const std::string& s);  // throws naming --shard
  static OffloadMode parse_offload(const std::string& s);     // throws naming --offload
  static const char* name(ShardStrategy s);
  static const char* name(OffloadMode m);
};

}  // namespace gpt
