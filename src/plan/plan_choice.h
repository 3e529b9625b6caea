// One point of `gpt plan`'s search space: the flags a run sets to trade memory, traffic and compute
// (strategy and shard group, recompute, offloads, wrap, gather slots, micro-batch and accumulation, reduce
// dtype, no-sync), how it is spelled on a command line, and which of its fields a user has fixed (pins:
// the flags given explicitly beside `--plan auto`, which override the plan's choice field by field).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "src/fsdp/offload_set.h"
#include "src/fsdp/options.h"
#include "src/model/recompute.h"
#include "src/model/wrap.h"
#include "src/plan/memplan.h"

namespace gpt {

struct PlanChoice {
  ShardStrategy strategy = ShardStrategy::full;
  int shard_group = 0;          // hybrid's G; 0 for the others
  RecomputePolicy recompute;
  OffloadSet offload;
  WrapPolicy wrap;              // block or blocks:K
  int gather_slots = 2;
  int B = 1;                    // per-rank micro-batch (sequences)
  int accum = 1;                // micro-steps per optimizer step: total batch / (B * T * world)
  DType reduce = DType::F32;    // --reduce-dtype
  bool no_sync = false;

  // The flags to paste: "--shard hybrid --shard-group 8 --recompute full --offload none --wrap blocks:2
  // --gather-slots 2 -B 4 -T 1024 --total-batch 524288 --reduce-dtype fp32" (and --no-sync).
  std::string flags(int T, int64_t total_batch) const;
  // The run `in` with this choice's fields set (model, world, T, compute and attention kept).
  MemPlanInput apply(MemPlanInput in) const;
  bool operator==(const PlanChoice& o) const;
};

// Fields fixed by explicit flags; the search enumerates only the others.
struct PlanPins {
  std::optional<ShardStrategy> strategy;
  std::optional<int> shard_group;
  std::optional<RecomputePolicy> recompute;
  std::optional<OffloadSet> offload;
  std::optional<WrapPolicy> wrap;
  std::optional<int> gather_slots, B;
  std::optional<DType> reduce;
  std::optional<bool> no_sync;
  bool any() const {
    return strategy || shard_group || recompute || offload || wrap || gather_slots || B || reduce || no_sync;
  }
};

}  // namespace gpt
