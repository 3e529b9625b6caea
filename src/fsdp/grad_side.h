// The gradient side of the full engine: where backward accumulates a unit's gradient and how it reaches the
// grad shard. Two moments, as in FSDP2's post_backward:
//   grad_buffer(u)  a gradient slot for u (Note [slot rotation], slot_pool.h: slot 0 is the root unit's),
//                   zeroed when u's gradient opens, which backward accumulates into
//   grad_ready(u)   start the slot's reduction (the GradReducer chosen for the geometry, grad_reducer.h)
// and a third, later: complete_reduction, when the slot is needed again (or at finish), waits for the
// reduction and adds the result into the fp32 grad shard (StateStore::add_reduced: divided by the world size;
// on the host when the states are offloaded). So a unit's reduction overlaps the backward of the units after
// it, up to the two rotating slots.
// --no-sync keeps the gradient elsewhere and reduces it on the last micro-step only: NoSyncGrads
// (grad_nosync.h) overrides the three hooks below.
//
// Adding a buffer: one place, a row in slot_buffers below (engine_buffers.h).
#pragma once
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "src/backend/backend.h"
#include "src/fsdp/engine_parts.h"
#include "src/fsdp/geometry.h"
#include "src/fsdp/grad_reducer.h"
#include "src/fsdp/slot_pool.h"
#include "src/fsdp/state_store.h"

namespace gpt {

class GradSide : public GradSink {
 public:
  // The rows (engine_buffers.h) of gradient slot i ([0] the root's, the others rotating).
  template <class F>
  static void slot_buffers(const EngineGeometry& g, int i, F&& f) {
    const int64_t padded = g.slot_padded(i), shard = g.slot_shard(i);
    constexpr MemDomain dev = MemDomain::device;
    constexpr MemCat cat = MemCat::gathered_grad;
    if (!g.opt.no_sync) f(BufferSpec{EngineBuffer::grad_data, i, dev, cat, 4 * padded}, &GradSlot::data);
    if (g.group > 1) f(BufferSpec{EngineBuffer::grad_rs_out, i, dev, cat, 4 * shard}, &GradSlot::rs_out);
    if (g.bf16_reduce) {
      f(BufferSpec{EngineBuffer::grad_send_bf16, i, dev, cat, 2 * padded}, &GradSlot::send_bf16);
      if (g.group > 1) f(BufferSpec{EngineBuffer::grad_recv_bf16, i, dev, cat, 2 * shard}, &GradSlot::recv_bf16);
    }
  }

  // `changed` is called whenever slot occupancy changes (the trace's counter tracks).
  GradSide(Backend& be, const Layout& layout, const EngineGeometry& geo, StateStore& store,
           std::unique_ptr<GradReducer> reducer, std::function<void()> changed);

  float* grad_buffer(int u, bool opens) override;
  void grad_ready(int u) override;
  void finish() override;
  bool in_flight() const override { return !pending_.empty(); }
  double bytes_in_use() const override;

 protected:
  // The hooks --no-sync overrides: whether this micro-step reduces, what the slot reduces, and what follows
  // a completed reduction.
  virtual bool reduces_now() const { return true; }
  virtual float* reduction_source(int u, GradSlot& g) { return g.data; }
  virtual void after_reduction(int u, int slot) {}

  Backend& be_;
  const EngineGeometry& geo_;
  StateStore& store_;

 private:
  int take_slot(int u);  // the slot u is filling, or a free one (completing the oldest reductions until one is)
  void complete_reduction(int slot);
  const std::string& name(int u) const { return layout_.unit(u).name; }

  const Layout& layout_;
  std::unique_ptr<GradReducer> reducer_;
  std::function<void()> changed_;
  std::vector<GradSlot> slots_;  // [0] root, [1..] rotating (SlotPool)
  SlotPool pool_;
  std::deque<int> pending_;  // slots with reductions in flight, oldest first
};

}  // namespace gpt
