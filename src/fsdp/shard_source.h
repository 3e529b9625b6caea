// Where a gather's input comes from: this rank's shard of the unit, on the device, in the compute dtype. The
// gather side (param_side.h) asks for it when it starts a unit's gather; which source answers is chosen once
// for the geometry (make_shard_source):
//   DeviceShards   the states are on the device: the fp32 param shard itself (fp32 compute), or converted
//                  into the slot's shard_compute buffer (bf16 compute)
//   DeviceCopies   --offload optimizer: the fp32 states are on the host; the device keeps a compute-dtype copy
//                  of every param shard (StateStore::device_copy), refreshed after each update
//   ShardUploads   --offload params: nothing stays on the device; the shard is uploaded host -> device ahead of
//                  its gather (shard_uploads.h, Note [upload window])
// Besides the input, a source is told of the moments that concern it (the uploads act on them; the others do
// nothing): after an acquire (prefetch_after), when a unit's gather has read its input (gathered), and when a
// unit is freed (resharded).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "src/backend/backend.h"
#include "src/fsdp/geometry.h"
#include "src/fsdp/state_store.h"

namespace gpt {

// A gather slot's buffers (ParamSide::slot_buffers declares them).
struct GatherSlot {
  void* data = nullptr;           // (slot padded) compute dtype: the gathered unit
  void* shard_compute = nullptr;  // (slot shard) compute dtype: this rank's shard converted for the all-gather
                                  // (bf16 compute, G > 1, unless the states' device copy is already bf16)
};

class ShardSource {
 public:
  virtual ~ShardSource() = default;
  // This rank's shard of u in the compute dtype on the device, the all-gather's input (G > 1). Whatever makes
  // it (a conversion, an upload's wait) is queued on the compute stream before the gather.
  virtual const void* send_buffer(int u, GatherSlot& slot) = 0;
  // G = 1, where the shard is the whole unit: slot.data receives it (a copy of send_buffer by default).
  virtual void fill_slot(int u, GatherSlot& slot);
  // The moments (see above). `order`: the pass's units in Layout::pass_order, `pos`: the acquired one's
  // position; `sharded(v)`: v is neither gathered nor being gathered.
  virtual void prefetch_after(const std::vector<int>& order, int pos, const std::function<bool(int)>& sharded) {}
  virtual void gathered(int u) {}
  virtual void resharded(int u) {}

 protected:
  ShardSource(Backend& be, const EngineGeometry& geo, StateStore& store) : be_(be), geo_(geo), store_(store) {}
  size_t shard_bytes(int u) const { return (size_t)geo_.units[u].shard_numel * be_.compute_size(); }
  Backend& be_;
  const EngineGeometry& geo_;
  StateStore& store_;
};

class DeviceShards : public ShardSource {
 public:
  DeviceShards(Backend& be, const EngineGeometry& geo, StateStore& store) : ShardSource(be, geo, store) {}
  const void* send_buffer(int u, GatherSlot& slot) override;
};

class DeviceCopies : public ShardSource {
 public:
  DeviceCopies(Backend& be, const EngineGeometry& geo, StateStore& store) : ShardSource(be, geo, store) {}
  const void* send_buffer(int u, GatherSlot&) override { return store_.device_copy(u); }
};

// The source for the geometry's offload mode; `layout` and `buffers` are the uploads'.
std::unique_ptr<ShardSource> make_shard_source(Backend& be, const Layout& layout, const EngineGeometry& geo,
                                               StateStore& store);

}  // namespace gpt
