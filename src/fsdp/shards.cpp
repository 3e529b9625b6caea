// See shards.h.
#include "src/fsdp/shards.h"

#include <algorithm>

namespace gpt {

std::vector<SegmentSpan> shard_segments(const Layout& layout, int u, int64_t shard_offset, int64_t shard_numel) {
  std::vector<SegmentSpan> out;
  const int64_t lo = shard_offset, hi = shard_offset + shard_numel;
  const std::vector<TensorSpec>& tensors = layout.unit(u).tensors;
  for (const TensorSpec& t : tensors) {
    const int64_t t_hi = &t == &tensors.back() ? hi : t.offset + t.numel;
    const int64_t a = std::max(lo, t.offset), b = std::min(hi, t_hi);
    if (a < b) out.push_back({a - lo, b - a, t.weight_decay, &t});
  }
  return out;
}

}  // namespace gpt
