// The gradient side of the engine: where backward accumulates a unit's gradient (grad_buffer) and how it
// reaches the grad shard once the unit is done (grad_ready): full-unit grad slot -> reduce-scatter summed
// over the shard group (an all-reduce when G = 1) -> [all-reduce summed across replica groups] -> added into
// the fp32 grad shard by the StateStore (divided by the world size; on the host when states are offloaded).
//
// Rules it keeps (docs/sharding.md says the same):
//  - Gradient slots: a full-unit fp32 slot (2 rotating ones + the root unit's, grad_slot_rule.h) receives the
//    backward's accumulation; grad_ready starts the reduction and the result is added to the grad shard once
//    it completes (when its slot is needed again, or at finish). --no-sync instead accumulates in a
//    persistent full-unit buffer per unit and reduces on the last micro-step only. With one rank and no
//    offload (direct grads) backward accumulates straight into the grad shards.
//  - Every gradient collective sums (hybrid's replica all-reduce too); the average over ranks is taken once,
//    in fp32, by the add into the grad shard. NCCL's own average on bf16 pre-multiplies each input by
//    bf16(1/N), which for N = 3 scales every gradient by 3 x bf16(1/3) = 1.002.
//  - --reduce-dtype bf16 (more than one rank): grad_ready rounds the fp32 full gradient to bf16 into the
//    slot's send buffer and reduces that; the bf16 result is widened to fp32 before it is added to the grad
//    shard. The hybrid replica all-reduce runs on the bf16 shard too.
//  - Hybrid: on a stream-ordered communicator (NCCL's shared comm stream, the simulated one) the replica
//    all-reduce is issued right behind its reduce-scatter and waited for when the slot completes; otherwise
//    it runs, blocking, when the slot completes (reduced_f32).
//  - grad_buffer only for a unit the model holds in backward; grad_ready only after a grad_buffer.
//
// Adding a buffer: one place, a row in unit_buffers or slot_buffers below (see engine_buffers.h).
#pragma once
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "src/backend/backend.h"
#include "src/dist/communicator.h"
#include "src/fsdp/geometry.h"
#include "src/fsdp/param_side.h"
#include "src/fsdp/state_store.h"
#include "src/model/layout.h"

namespace gpt {

class GradSide {
 public:
  // A unit's gradient for the current micro-step: idle until grad_buffer, accumulating until grad_ready. Its
  // reduction is then in flight in a gradient slot (Slot::reducing) until complete_reduction.
  enum class State { idle, accumulating };
  struct UnitGrad {
    float* nosync_acc = nullptr;  // (padded) fp32 full-grad accumulator for --no-sync
    State state = State::idle;
  };
  struct Slot {
    float* data = nullptr;      // (slot padded) fp32 full-unit gradient
    float* rs_out = nullptr;    // (slot shard) fp32 reduce-scatter output (G > 1)
    void* send_bf16 = nullptr;  // (slot padded) bf16: src rounded, the reduction's input (in place when G = 1)
    void* recv_bf16 = nullptr;  // (slot shard) bf16: reduce-scatter output (G > 1)
    float* src = nullptr;       // what is being reduced: data, or the unit's --no-sync accumulator
    int owner = -1;             // unit using the slot, -1 when free
    bool reducing = false;      // its reduction is in flight (listed in pending_)
    WorkPtr work;
    WorkPtr replica_work;       // hybrid on a stream-ordered communicator: the replica all-reduce, issued
                                // right behind the reduce-scatter
  };

  // The rows (engine_buffers.h): per unit, per gradient slot ([0] the root's, the others rotating).
  template <class F>
  static void unit_buffers(const EngineGeometry& g, int u, F&& f) {
    if (g.opt.no_sync && !g.direct_grads && !g.opt.inference)
      f(BufferSpec{EngineBuffer::nosync_acc, u, MemDomain::device, MemCat::gathered_grad, 4 * g.units[u].padded},
        &UnitGrad::nosync_acc);
  }
  template <class F>
  static void slot_buffers(const EngineGeometry& g, int i, F&& f) {
    const int64_t padded = g.slot_padded(i), shard = g.slot_shard(i);
    constexpr MemDomain dev = MemDomain::device;
    constexpr MemCat cat = MemCat::gathered_grad;
    if (!g.opt.no_sync) f(BufferSpec{EngineBuffer::grad_data, i, dev, cat, 4 * padded}, &Slot::data);
    if (g.group > 1) f(BufferSpec{EngineBuffer::grad_rs_out, i, dev, cat, 4 * shard}, &Slot::rs_out);
    if (g.bf16_reduce) {
      f(BufferSpec{EngineBuffer::grad_send_bf16, i, dev, cat, 2 * padded}, &Slot::send_bf16);
      if (g.group > 1) f(BufferSpec{EngineBuffer::grad_recv_bf16, i, dev, cat, 2 * shard}, &Slot::recv_bf16);
    }
  }

  // `changed` is called whenever slot occupancy changes (the trace's counter tracks).
  GradSide(Backend& be, Communicator& shard_comm, Communicator& replica_comm, const Layout& layout,
           const EngineGeometry& geo, StateStore& store, const ParamSide& params, std::function<void()> changed);

  float* grad_buffer(int u);
  void grad_ready(int u);
  void begin_micro_step(bool last_micro_step) { last_micro_ = last_micro_step; }
  void finish();  // every reduction completed and added into the grad shards (the host's too)
  void check_closed(int u, const char* what) const;  // throws naming `what` when u's gradient is open
  void check_none_in_flight(const char* what) const;  // throws naming `what` when a reduction is in flight
  double bytes_in_use() const;  // gradient slots in use

 private:
  int take_grad_slot(int u);
  void start_reduction(Slot& g, int u);
  void complete_reduction(Slot& g);
  float* reduced_f32(Slot& g);  // the finished reduction as fp32 on the device (widened from bf16)
  int index(const Slot& g) const { return (int)(&g - slots_.data()); }
  const std::string& name(int u) const { return layout_.unit(u).name; }

  Backend& be_;
  Communicator& shard_comm_;    // ranks sharing a unit's shards (size G)
  Communicator& replica_comm_;  // ranks holding the same shard (size N/G)
  const Layout& layout_;
  const EngineGeometry& geo_;
  StateStore& store_;
  const ParamSide& params_;
  std::function<void()> changed_;
  std::vector<UnitGrad> units_;
  std::vector<Slot> slots_;  // [0] root, [1..] rotating
  std::deque<int> pending_;  // slots with reductions in flight, oldest first
  bool last_micro_ = true;
};

}  // namespace gpt
