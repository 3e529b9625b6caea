// See geometry.h.
#include "src/fsdp/geometry.h"

#include <algorithm>

#include "src/core/check.h"

namespace gpt {

void EngineGeometry::options_check_flags(const FsdpOptions& opt) {
  GPT_CHECK(opt.gather_slots >= 1 && opt.gather_slots <= 64, "--gather-slots must be in [1, 64], got ",
            opt.gather_slots);
  const bool hybrid = opt.strategy == ShardStrategy::hybrid;
  GPT_CHECK(hybrid || opt.shard_group == 0, "--shard-group is only for --shard hybrid");
  GPT_CHECK(!hybrid || opt.shard_group > 0, "--shard hybrid needs --shard-group G");
}

void EngineGeometry::options_check(const FsdpOptions& opt, int world, const char* world_flag) {
  GPT_CHECK(world >= 1, world_flag, " must be >= 1, got ", world);
  options_check_flags(opt);
  GPT_CHECK(opt.strategy != ShardStrategy::hybrid || world % opt.shard_group == 0, "--shard-group ", opt.shard_group,
            " must divide ", world_flag, " ", world);
}

int EngineGeometry::shard_group_size(const FsdpOptions& opt, int world) {
  switch (opt.strategy) {
    case ShardStrategy::full:
    case ShardStrategy::grad_op: return world;
    case ShardStrategy::none: return 1;
    case ShardStrategy::hybrid: return opt.shard_group;
  }
  return 1;
}

EngineGeometry::EngineGeometry(const std::vector<int64_t>& unit_numel, int world_, int shard_rank,
                               const FsdpOptions& opt_, DType compute_)
    : world(world_), compute(compute_), opt(opt_) {
  GPT_CHECK(unit_numel.size() >= 2, "fsdp geometry: needs the root unit and at least one other");
  group = shard_group_size(opt, world);
  GPT_CHECK(shard_rank >= 0 && shard_rank < group, "fsdp geometry: shard rank ", shard_rank, " outside a group of ",
            group);
  const OffloadMode off = opt.offload;
  host_states = off != OffloadMode::none;
  direct_params = compute == DType::F32 && group == 1 && off == OffloadMode::none;
  compute_copy = compute != DType::F32 && group == 1 && off == OffloadMode::none;
  direct_grads = world == 1 && off == OffloadMode::none;
  bf16_reduce = opt.reduce_dtype == DType::BF16 && world > 1;
  for (size_t u = 0; u < unit_numel.size(); u++) {
    UnitGeometry g;
    g.numel = unit_numel[u];
    g.padded = (g.numel + group - 1) / group * group;
    g.shard_numel = g.padded / group;
    g.shard_offset = (int64_t)shard_rank * g.shard_numel;
    if (u > 0) {
      max_padded = std::max(max_padded, g.padded);
      max_shard = std::max(max_shard, g.shard_numel);
    }
    units.push_back(g);
  }
  if (!resident_params())
    // grad_op keeps every forward gather; otherwise K, but never more than there are units to hold (a wide
    // --wrap can leave fewer non-root units than K)
    rotating_slots = opt.strategy == ShardStrategy::grad_op ? (int)units.size() - 1
                                                            : std::min(opt.gather_slots, (int)units.size() - 1);
  if (!direct_grads && !opt.inference) grad_slots = 3;
}

int64_t EngineGeometry::shard_elems() const {
  int64_t n = 0;
  for (const UnitGeometry& u : units) n += u.shard_numel;
  return n;
}

int64_t EngineGeometry::psi() const {
  int64_t n = 0;
  for (const UnitGeometry& u : units) n += u.numel;
  return n;
}

}  // namespace gpt
