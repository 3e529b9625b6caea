// See shard_source.h.
#include "src/fsdp/shard_source.h"

#include "src/fsdp/shard_uploads.h"

namespace gpt {

void ShardSource::fill_slot(int u, GatherSlot& slot) { be_.copy_d2d(slot.data, send_buffer(u, slot), shard_bytes(u)); }

const void* DeviceShards::send_buffer(int u, GatherSlot& slot) {
  const float* mine = store_.param(u);  // (shard) fp32
  if (be_.compute_dtype() == DType::F32) return mine;
  be_.f32_to_compute(slot.shard_compute, mine, (size_t)geo_.units[u].shard_numel);
  return slot.shard_compute;
}

std::unique_ptr<ShardSource> make_shard_source(Backend& be, const Layout& layout, const EngineGeometry& geo,
                                               StateStore& store) {
  switch (geo.opt.offload) {
    case OffloadMode::none: return std::make_unique<DeviceShards>(be, geo, store);
    case OffloadMode::optimizer: return std::make_unique<DeviceCopies>(be, geo, store);
    case OffloadMode::params: return std::make_unique<ShardUploads>(be, layout, geo, store);
  }
  return nullptr;
}

}  // namespace gpt
