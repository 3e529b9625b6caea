// This rank's shard of a unit, as the optimizer and the checkpoints see it: the four fp32 states it keeps,
// and the segments one optimizer call updates. Shared by every engine (sharding_engine.h), so that the naive
// and the full engine cut their shards the same way and update them with the same calls.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "src/model/layout.h"

namespace gpt {

class Backend;

// The four fp32 shards each rank keeps of a unit.
enum class ShardState { param, grad, adam_m, adam_v };

// One contiguous run of this rank's shard that one optimizer call updates. Shards are cut at tensor
// boundaries, so a segment lies in one tensor and takes that tensor's weight decay. Pointers are in the
// states' memory (device, or host when offloaded), n elements each.
struct ShardSegment {
  float* param;
  // The same n parameters in the compute copy (compute dtype, device), or null when there is none: the update
  // must write the updated parameters there too (Backend::adamw_update's param_out), or the model reads stale
  // ones.
  void* param_out;
  const float* grad;
  float* m;
  float* v;
  size_t n;
  bool decay;  // the tensor takes weight decay (matrices and embeddings)
};

using SegmentUpdate = std::function<void(Backend& states, const ShardSegment&)>;

// Where segments lie in a shard: `offset` elements from the shard's start, n long.
struct SegmentSpan {
  int64_t offset = 0;
  int64_t n = 0;
  bool decay = false;
  const TensorSpec* tensor = nullptr;  // the tensor it lies in (the layout's)
};

// Which tensors a partial gradient norm counts (ShardingEngine::grad_sumsq).
using TensorFilter = std::function<bool(const TensorSpec&)>;

// The segments of unit u's slice [shard_offset, shard_offset + shard_numel), in order. The padding past the
// unit's last tensor has a zero gradient and joins the last tensor's segment (any decay keeps it 0).
std::vector<SegmentSpan> shard_segments(const Layout& layout, int u, int64_t shard_offset, int64_t shard_numel);

}  // namespace gpt
