// --offload params: the param shards live on the host, and a unit's shard is uploaded into a device upload
// stage (on the copy stream) before each gather that reads it. The gather side calls it at its moments
// (shard_source.h): after an acquire it starts the uploads of the window below; when a gather starts it waits
// for the unit's upload and hands the stage over (send_buffer, fill_slot); once the gather has read the stage,
// or the unit is freed unused, the stage is free again.
//
// Note [upload window]
// A unit's upload runs one unit ahead of the gather that reads it: acquiring the unit at position p of the
// pass uploads the units up to p+K when G > 1 (K = --gather-slots; the gather of p+K starts at the next
// acquire, Note [prefetch window] in param_side.h), or up to p+1 when G = 1 (where the "gather" is the
// conversion into the slot at the unit's own acquire). The compute stream waits for an upload only where the
// gather or conversion that reads it is queued, so the copy runs beside the compute queued before it. At
// G = 1 the shard is converted straight into the slot (bf16), or in fp32 is the unit itself: the slot and the
// stage trade buffers, so nothing is copied twice. There are 2 + K stages (EngineGeometry::upload_stages):
// the root's ([0], Note [root unit]) and one more than the rotating gather slots, as the window holds one
// upload beyond the gathers in flight.
#pragma once
#include <cstdint>
#include <vector>

#include "src/fsdp/shard_source.h"

namespace gpt {

class ShardUploads : public ShardSource {
 public:
  struct UploadStage {
    float* data = nullptr;  // (max shard; [0] the root's shard) fp32: a shard uploaded from the host
    int owner = -1;         // unit whose upload it holds, -1 when free
  };
  // The rows (engine_buffers.h) of upload stage i.
  template <class F>
  static void stage_buffers(const EngineGeometry& g, int i, F&& f) {
    f(BufferSpec{EngineBuffer::upload_stage, i, MemDomain::device, MemCat::host_offload, 4 * g.slot_shard(i)},
      &UploadStage::data);
  }

  ShardUploads(Backend& be, const Layout& layout, const EngineGeometry& geo, StateStore& store);
  const void* send_buffer(int u, GatherSlot& slot) override;
  void fill_slot(int u, GatherSlot& slot) override;
  void prefetch_after(const std::vector<int>& order, int pos, const std::function<bool(int)>& sharded) override;
  void gathered(int u) override { free_stage(u); }
  void resharded(int u) override { free_stage(u); }

 private:
  struct UnitUpload {
    int stage = -1;       // the stage holding its upload, -1 when none
    uint64_t ticket = 0;  // that upload's copy ticket
  };
  int free_stage_index() const;  // a free non-root stage, or -1
  void upload(int u);            // u's shard into a free stage, on the copy stream; nobody waits yet
  const float* wait_upload(int u);  // compute waits for u's upload (issuing it first if need be)
  void free_stage(int u);

  const Layout& layout_;
  std::vector<UploadStage> stages_;  // [0] the root's, the others any unit's
  std::vector<UnitUpload> units_;
};

}  // namespace gpt
