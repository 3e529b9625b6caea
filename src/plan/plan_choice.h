// One point of `gpt plan`'s search space: the flags a run sets to trade memory, traffic and compute
// (tensor-parallel size and sequence parallelism, strategy and shard group over the data-parallel ranks,
// recompute, offloads, wrap, gather slots, micro-batch and accumulation, reduce dtype, no-sync), how it is spelled on a command line, and which of its fields a user has fixed (pins:
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
  TpOptions tp;                 // --tp T, --sequence-parallel: the mesh is (world / T) data-parallel x T
  ShardStrategy strategy = ShardStrategy::full;
  int shard_group = 0;          // hybrid's G; 0 for the others
  RecomputePolicy recompute;
  OffloadSet offload;
  WrapPolicy wrap;              // block or blocks:K
  int gather_slots = 2;
  int B = 1;                    // per data-parallel rank micro-batch (sequences; a TP group shares them)
  int accum = 1;                // micro-steps per optimizer step: total batch / (B * T_seq * world / tp.size)
  DType reduce = DType::F32;    // --reduce-dtype
  bool no_sync = false;

  // The flags to paste: "--shard hybrid --shard-group 8 --recompute full --offload none --wrap blocks:2
  // --gather-slots 2 -B 4 -T 1024 --total-batch 524288 --reduce-dtype fp32" (and --no-sync), led by
  // "--tp 4" (and "--sequence-parallel off") where the mesh has tensor parallelism.
  std::string flags(int T, int64_t total_batch) const;
  // "tp 4 (sequence parallel) x dp 16", or "dp 64" without tensor parallelism.
  std::string mesh(int world) const;
  // The run `in` with this choice's fields set (model, world, T, compute and attention kept).
  MemPlanInput apply(MemPlanInput in) const;
  bool operator==(const PlanChoice& o) const;
};

// Fields fixed by explicit flags; the search enumerates only the others.
struct PlanPins {
  std::optional<int> tp;                  // --tp T
  std::optional<bool> sequence_parallel;  // --sequence-parallel on|off
  std::optional<ShardStrategy> strategy;
  std::optional<int> shard_group;
  std::optional<RecomputePolicy> recompute;
  std::optional<OffloadSet> offload;
  std::optional<WrapPolicy> wrap;
  std::optional<int> gather_slots, B;
  std::optional<DType> reduce;
  std::optional<bool> no_sync;
  bool any() const {
    return tp || sequence_parallel || strategy || shard_group || recompute || offload || wrap || gather_slots || B || reduce || no_sync;
  }
};

}  // namespace gpt
