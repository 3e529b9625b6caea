// The gather side of the full engine: the parameters the model reads between acquire and release, for units
// that are sharded (G > 1) or whose states are offloaded. Four moments, named as in FSDP2:
//   unshard(u)           start u's all-gather into a gather slot (the slot's rotation: Note [slot rotation],
//                        slot_pool.h); its input is this rank's shard from the ShardSource (shard_source.h)
//   wait_for_unshard(u)  wait for it
//   prefetch_after(u)    start the gathers of the units the pass uses next (Note [prefetch window])
//   reshard(u)           free u's slot
// The model's calls map onto them: acquire (pre_forward / pre_backward) unshards u unless it is gathered,
// waits for it and prefetches after it; release (post_forward / post_backward) reshards u, unless forward's
// gather is kept for the backward (Note [root unit]; every unit under --shard grad_op).
//
// Note [root unit]
// The tied embeddings (Layout::root_unit) are used first and last by both passes: the token embedding opens
// forward, the LM head closes forward and opens backward, the encoder's backward closes it. So the root unit
// is gathered once per step, at the start of forward, into a gather slot of its own (slot 0), and stays
// gathered until its gradient is reduced at the end of backward (FSDP's root-unit rule); its gradient slot is
// slot 0 of the gradient side, and its upload stage (offload params) stage 0. It is never prefetched: it has
// its own slot and is gathered by the first acquire of a step.
//
// Note [prefetch window]
// After unit u (position p of the pass's Layout::pass_order) is acquired, the gathers of the units at
// positions p+1 .. p+K-1 are started (K = --gather-slots), in pass order: the root unit is skipped, so are
// units already gathered or in flight (grad_op's kept ones, earlier prefetches), and the window stops at the
// first unit that finds no free slot, so gathers go on the wire in the order they are used. The unit in use
// holds a slot of its own, so while it computes at most K-1 gathers are in flight beyond it; K = 1 prefetches
// nothing; at G = 1 there is nothing to overlap (the "gather" is a local copy or conversion). grad_op has one
// slot per non-root unit and K sets only how far ahead forward prefetches.
// The window is filled at acquire only, not when release frees a slot: between a release and the next
// acquire the engine runs nothing a gather could overlap (forward: the next acquire follows at once, and
// after the last release of the pass only the LM head runs; backward: grad_ready, which only starts the
// unit's reduction), so a gather started at the release would begin no earlier in useful terms, yet it would
// go on the wire ahead of that reduction, which the two rotating gradient slots need back within two units.
// Nor does the window cross into the next pass: a forward does not know whether a backward follows (eval and
// sample run forwards only).
//
// Adding a buffer: one place, a row in slot_buffers below (engine_buffers.h).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "src/backend/backend.h"
#include "src/dist/communicator.h"
#include "src/fsdp/engine_parts.h"
#include "src/fsdp/geometry.h"
#include "src/fsdp/shard_source.h"
#include "src/fsdp/slot_pool.h"

namespace gpt {

class ParamSide : public ParamSupply {
 public:
  // The rows (engine_buffers.h) of gather slot i ([0] the root's, the others sized for the largest unit).
  template <class F>
  static void slot_buffers(const EngineGeometry& g, int i, F&& f) {
    const int64_t cs = (int64_t)dtype_size(g.compute);
    constexpr MemDomain dev = MemDomain::device;
    f(BufferSpec{EngineBuffer::slot_data, i, dev, MemCat::gathered_param, cs * g.slot_padded(i)}, &GatherSlot::data);
    if (g.compute != DType::F32 && g.opt.offload != OffloadMode::optimizer && g.group > 1)
      f(BufferSpec{EngineBuffer::slot_shard_compute, i, dev, MemCat::workspace, cs * g.slot_shard(i)},
        &GatherSlot::shard_compute);
  }

  // `changed` is called whenever slot occupancy changes (the trace's counter tracks).
  ParamSide(Backend& be, Communicator& shard_comm, const Layout& layout, const EngineGeometry& geo,
            const EngineBuffers& buffers, ShardSource& source, std::function<void()> changed);

  const void* acquire(int u, Pass pass) override;
  void release(int u, Pass pass) override;
  void reload(int u) override { reshard(u); }
  void free_all() override;
  double bytes_in_use() const override;

 private:
  enum class State { sharded, gathering, gathered };
  struct UnitGather {
    State state = State::sharded;
    int slot = -1;        // its gather slot while gathering or gathered
    WorkPtr gather;       // the all-gather in flight
  };

  void unshard(int u);
  void wait_for_unshard(int u);
  void prefetch_after(int u, Pass pass);
  void reshard(int u);
  bool kept_for_backward(int u) const;  // forward's release keeps it (Note [root unit], grad_op)
  const std::string& name(int u) const { return layout_.unit(u).name; }

  Backend& be_;
  Communicator& shard_comm_;
  const Layout& layout_;
  const EngineGeometry& geo_;
  ShardSource& source_;
  std::function<void()> changed_;
  std::vector<UnitGather> units_;
  std::vector<GatherSlot> slots_;  // [0] the root unit's, the others rotating (SlotPool)
  SlotPool pool_;
};

}  // namespace gpt
