// See engine_buffers.h. for_each_buffer walks the parts' buffer lists in the engine's allocation order;
// engine_buffer_specs() is that walk's list of specs.
#include "src/fsdp/engine_buffers.h"

#include "src/core/check.h"
#include "src/fsdp/grad_nosync.h"
#include "src/fsdp/grad_side.h"
#include "src/fsdp/param_side.h"
#include "src/fsdp/shard_uploads.h"
#include "src/fsdp/state_store.h"

namespace gpt {

namespace {
// Calls f(spec, member) for every buffer of the geometry, in allocation order: per unit the states' then the
// gradient side's, the gather slots, the upload stages, the states' staging, then per gradient slot the
// gradient side's and the states' host copy.
template <class F>
void for_each_buffer(const EngineGeometry& g, F&& f) {
  for (int u = 0; u < (int)g.units.size(); u++) {
    StateStore::unit_buffers(g, u, f);
    NoSyncGrads::unit_buffers(g, u, f);
  }
  for (int i = 0; i < g.gather_slots(); i++) ParamSide::slot_buffers(g, i, f);
  for (int i = 0; i < g.upload_stages(); i++) ShardUploads::stage_buffers(g, i, f);
  StateStore::staging_buffers(g, f);
  for (int i = 0; i < g.grad_slots; i++) {
    GradSide::slot_buffers(g, i, f);
    StateStore::grad_slot_buffers(g, i, f);
  }
}
}  // namespace

std::vector<BufferSpec> engine_buffer_specs(const EngineGeometry& geo) {
  std::vector<BufferSpec> specs;
  for_each_buffer(geo, [&](const BufferSpec& b, auto /*member*/) { specs.push_back(b); });
  return specs;
}

EngineBuffers::EngineBuffers(const EngineGeometry& geo, Backend& device, Backend& host)
    : device_(device), host_(host) {
  for (const BufferSpec& b : engine_buffer_specs(geo)) {
    void* p = owner(b.domain).alloc((size_t)b.bytes, b.cat);
    owner(b.domain).zero(p, (size_t)b.bytes);
    all_.emplace_back(b, p);
    by_row_[{b.what, b.index}] = p;
  }
}

EngineBuffers::~EngineBuffers() {
  for (auto& [b, p] : all_) owner(b.domain).free(p);
}

void* EngineBuffers::at(const BufferSpec& b) const {
  auto it = by_row_.find({b.what, b.index});
  GPT_CHECK(it != by_row_.end(), "fsdp: buffer ", (int)b.what, "[", b.index, "] was not allocated");
  return it->second;
}

}  // namespace gpt
