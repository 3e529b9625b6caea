// Where the model states live: this rank's fp32 shards of every unit (param, grad, Adam m and v) in one
// Backend (the device, or its host side when offloaded), the device copy of the params (the gather input
// under offload optimizer, or the compute copy), and the offload copies between the two sides. It also owns
// every buffer of the engine (EngineBuffers), the other parts binding theirs from it.
//
// Rules it keeps:
//  - The states are reached through one Backend (states()), so no caller branches on where they are.
//  - Offload copies run on the backend's copy stream, ordered by tickets (events), never by stream syncs: a
//    unit's upload (upload_param) is waited for by the compute stream only, and only where the gather that
//    reads it is queued (ShardUploads), so it overlaps the compute queued before; a reduced shard's
//    copy to the host (add_reduced) is waited for by the host only when that gradient slot's host buffer is
//    needed again or at finish_host_grads, and by the compute stream before the slot's device buffers are
//    rewritten (release_copy_source). Copies of one direction complete in issue order, so waiting for the
//    newest of each covers all. (The uploads themselves, and their window: shard_uploads.h.)
//  - Device copies of the params (param_dev) are refreshed by one mechanism, refresh_device_copy, whenever
//    the fp32 params change by any other way than an update that writes them itself (loading, host AdamW).
//  - The reduced gradient is divided by the world size as it is added into the grad shard: the average over
//    ranks, taken once in fp32 (grad_reducer.h says why not in the collective).
//
// Adding a buffer: one place, a row in unit_buffers, staging_buffers or grad_slot_buffers below
// (engine_buffers.h).
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "src/backend/backend.h"
#include "src/fsdp/engine_buffers.h"
#include "src/fsdp/geometry.h"
#include "src/fsdp/shards.h"
#include "src/model/layout.h"

namespace gpt {

class StateStore {
 public:
  struct UnitStates {
    float* param = nullptr;     // (shard) fp32 master, in the states' memory
    float* grad = nullptr;      // (shard) fp32 grad shard
    float* m = nullptr;         // (shard) fp32 Adam first moment
    float* v = nullptr;         // (shard) fp32 Adam second moment
    void* param_dev = nullptr;  // (shard) compute dtype, device: the offload optimizer's gather input, or the
                                // compute copy the model reads (the two rules never meet)
  };
  // Per gradient slot, offload only: the reduced shard's copy to the host, on the copy stream.
  struct ReducedCopy {
    float* host_rs = nullptr;  // (max shard, or max padded when G = 1) fp32 host copy of the reduced gradient
    uint64_t d2h = 0;          // its ticket
    bool reads_device = false; // compute must wait for it before rewriting the device buffers it reads
    int unit = -1;             // unit whose host grad shard still needs host_rs added, -1 when none
  };

  // The rows (engine_buffers.h): per unit, the store's own staging, per gradient slot.
  template <class F>
  static void unit_buffers(const EngineGeometry& g, int u, F&& f) {
    const int64_t cs = (int64_t)dtype_size(g.compute), shard = g.units[u].shard_numel;
    const MemDomain states = g.states_domain(), dev = MemDomain::device;
    f(BufferSpec{EngineBuffer::param, u, states, MemCat::param_shard, 4 * shard}, &UnitStates::param);
    if (!g.opt.inference) {
      f(BufferSpec{EngineBuffer::grad, u, states, MemCat::grad_shard, 4 * shard}, &UnitStates::grad);
      f(BufferSpec{EngineBuffer::adam_m, u, states, MemCat::optim_state, 4 * shard}, &UnitStates::m);
      f(BufferSpec{EngineBuffer::adam_v, u, states, MemCat::optim_state, 4 * shard}, &UnitStates::v);
    }
    if (g.opt.offload == OffloadMode::optimizer)
      f(BufferSpec{EngineBuffer::param_dev, u, dev, MemCat::param_shard, cs * shard}, &UnitStates::param_dev);
    if (g.compute_copy)
      f(BufferSpec{EngineBuffer::compute_copy, u, dev, MemCat::gathered_param, cs * shard}, &UnitStates::param_dev);
  }
  template <class F>
  static void staging_buffers(const EngineGeometry& g, F&& f) {
    if (g.opt.offload == OffloadMode::optimizer && g.compute != DType::F32)
      f(BufferSpec{EngineBuffer::refresh_f32, 0, MemDomain::device, MemCat::host_offload,
                   4 * std::max(g.max_shard, g.units[0].shard_numel)},
        &StateStore::refresh_f32_);
  }
  template <class F>
  static void grad_slot_buffers(const EngineGeometry& g, int i, F&& f) {
    if (g.host_states)
      f(BufferSpec{EngineBuffer::grad_host_rs, i, MemDomain::host, MemCat::host_offload,
                   4 * (g.group > 1 ? g.slot_shard(i) : g.slot_padded(i))},
        &ReducedCopy::host_rs);
  }

  StateStore(Backend& be, const Layout& layout, const EngineGeometry& geo);

  const EngineBuffers& buffers() const { return buffers_; }
  Backend& states() { return *states_; }
  float* param(int u) { return units_[u].param; }
  float* grad(int u) { return units_[u].grad; }
  void* device_copy(int u) { return units_[u].param_dev; }
  // An engine with gradients and Adam state (not inference), or throw naming `what`.
  void check_trains(const char* what) const;

  // Offload params: starts the copy of unit u's fp32 param shard to the device buffer `dst` (shard) on the
  // copy stream and returns its ticket; compute may read dst after Backend::wait_copy_device(ticket).
  uint64_t upload_param(int u, float* dst);
  // Adds unit u's reduced gradient (device, shard) into its grad shard, divided by the world size: at once on
  // the device, or (offload) copied to the host through gradient slot `slot` and added there later.
  void add_reduced(int slot, int u, const float* reduced);
  void release_copy_source(int slot);  // compute: wait for the slot's d2h copy before reusing its buffers
  void finish_host_grads();            // host: every copied reduction added; the host grad shards are complete
  void wait_host_copies();             // the host waits for every offload copy issued so far
  void refresh_device_copy(int u);     // param_dev <- param (offload optimizer, compute copy)

  void zero_grads();
  // This rank's sum of squares over every grad shard, or (counted) over the segments of the tensors it accepts.
  double grad_sumsq(const TensorFilter* counted = nullptr);
  // Runs `update` on every segment of every shard, then refreshes the device copies (offload optimizer).
  void update(const SegmentUpdate& update);
  void read(int u, ShardState which, std::vector<float>& out);  // host copy of this rank's shard
  void write(int u, ShardState which, const float* in /*(shard_numel)*/);  // new contents (no refresh)

 private:
  float* state_ptr(int u, ShardState which);
  void finish_host_grad(ReducedCopy& c);
  // Notes the newest copy of its direction (uploads [0], downloads [1]); returns the ticket.
  uint64_t track(uint64_t ticket, bool to_host) {
    if (ticket) last_copy_[to_host ? 1 : 0] = ticket;
    return ticket;
  }
  const std::string& name(int u) const { return layout_.unit(u).name; }

  Backend& be_;                      // compute: where the device copies and staging live
  std::unique_ptr<Backend> host_;    // the host side of be_ (pinned on cuda): offloaded states, host copies
  Backend* states_;                  // where the fp32 model states live: &be_, or host_ when offloaded
  const Layout& layout_;
  const EngineGeometry& geo_;
  EngineBuffers buffers_;            // every buffer of the engine (declared after host_, which frees some)
  std::vector<UnitStates> units_;
  std::vector<ReducedCopy> copies_;  // [gradient slot]
  float* refresh_f32_ = nullptr;     // (max shard) fp32, device: a host param shard uploaded on its way to param_dev
                                     // (offload optimizer, bf16 compute: the conversion runs on the device)
  uint64_t last_copy_[2] = {0, 0};   // tickets of the newest upload and download (each direction in order)
};

}  // namespace gpt
