// See shard_uploads.h.
#include "src/fsdp/shard_uploads.h"

#include <algorithm>

#include "src/core/check.h"

namespace gpt {

ShardUploads::ShardUploads(Backend& be, const Layout& layout, const EngineGeometry& geo, StateStore& store)
    : ShardSource(be, geo, store), layout_(layout), stages_(geo.upload_stages()), units_(geo.units.size()) {
  for (int i = 0; i < (int)stages_.size(); i++)
    stage_buffers(geo_, i, [&](const BufferSpec& b, auto member) { store_.buffers().bind(b, stages_[i].*member); });
}

int ShardUploads::free_stage_index() const {
  for (int k = 1; k < (int)stages_.size(); k++)
    if (stages_[k].owner < 0) return k;
  return -1;
}

void ShardUploads::upload(int u) {
  const int i = layout_.is_root(u) ? 0 : free_stage_index();
  GPT_CHECK(i >= 0 && stages_[i].owner < 0, "fsdp: no free upload stage for unit ", layout_.unit(u).name);
  stages_[i].owner = u;
  units_[u].stage = i;
  units_[u].ticket = store_.upload_param(u, stages_[i].data);
}

const float* ShardUploads::wait_upload(int u) {
  if (units_[u].stage < 0) upload(u);
  be_.wait_copy_device(units_[u].ticket);  // the compute stream, here only: where what reads the upload is queued
  return stages_[units_[u].stage].data;
}

void ShardUploads::free_stage(int u) {
  UnitUpload& x = units_[u];
  if (x.stage < 0) return;
  stages_[x.stage].owner = -1;
  x.stage = -1;
  x.ticket = 0;
}

// G > 1. In fp32 the stage itself is the all-gather's input, freed once the gather has read it (gathered);
// in bf16 the stage is converted into the slot and free at once (a later upload into it waits, on the copy
// stream, for the conversion queued before it).
const void* ShardUploads::send_buffer(int u, GatherSlot& slot) {
  const float* staged = wait_upload(u);
  if (be_.compute_dtype() == DType::F32) return staged;
  be_.f32_to_compute(slot.shard_compute, staged, (size_t)geo_.units[u].shard_numel);
  free_stage(u);
  return slot.shard_compute;
}

// G = 1: the shard is the unit (Note [upload window]).
void ShardUploads::fill_slot(int u, GatherSlot& slot) {
  const float* staged = wait_upload(u);
  if (be_.compute_dtype() == DType::F32) {  // the stage becomes the slot's buffer, and the slot's the stage's
    UploadStage& stage = stages_[units_[u].stage];
    void* slot_buffer = slot.data;
    slot.data = stage.data;
    stage.data = static_cast<float*>(slot_buffer);
  } else {
    be_.f32_to_compute(slot.data, staged, (size_t)geo_.units[u].shard_numel);
  }
  free_stage(u);
}

void ShardUploads::prefetch_after(const std::vector<int>& order, int pos, const std::function<bool(int)>& sharded) {
  const int ahead = geo_.group > 1 ? geo_.opt.gather_slots : 1;  // Note [upload window]
  for (int j = pos + 1; j <= std::min((int)order.size() - 1, pos + ahead); j++) {
    const int next = order[j];
    if (layout_.is_root(next) || !sharded(next) || units_[next].stage >= 0) continue;
    if (free_stage_index() < 0) break;
    upload(next);
  }
}

}  // namespace gpt
