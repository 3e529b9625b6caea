// See sharding_engine.h: what every engine does the same way.
#include "src/fsdp/sharding_engine.h"

namespace gpt {

void ShardingEngine::set_unit_from_host(int u, const float* full) {
  const UnitGeometry& g = shard(u);
  std::vector<float> mine((size_t)g.shard_numel, 0.0f);  // (shard) this rank's slice; the padding stays 0
  for (int64_t i = 0; i < g.shard_numel && g.shard_offset + i < g.numel; i++) mine[i] = full[g.shard_offset + i];
  shard_from_host(u, ShardState::param, mine);
}

std::vector<float> gather_shards_to_host(Backend& be, Communicator& group, const UnitGeometry& g,
                                         const std::vector<float>& mine, const std::string& label) {
  std::vector<float> full = mine;  // (padded) fp32, cut to numel below
  if (g.shard_numel < g.padded) {  // other ranks own the rest of the unit
    full.resize((size_t)g.padded);
    auto* in = static_cast<float*>(be.alloc(mine.size() * sizeof(float), MemCat::workspace));   // (shard)
    auto* out = static_cast<float*>(be.alloc(full.size() * sizeof(float), MemCat::workspace));  // (padded)
    be.copy_h2d(in, mine.data(), mine.size() * sizeof(float));
    be.synchronize();
    group.set_label(label);
    group.all_gather(out, in, (size_t)g.shard_numel, DType::F32);
    be.copy_d2h(full.data(), out, full.size() * sizeof(float));
    be.synchronize();
    be.free(in);
    be.free(out);
  }
  full.resize((size_t)g.numel);
  return full;
}

}  // namespace gpt
