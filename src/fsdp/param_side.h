// The parameter side of the engine: what the model reads between acquire and release. It gathers a unit's
// full parameters into a fixed pool of slots (an all-gather of the shards, or a local copy when G = 1; under
// offload params the shard is first uploaded host -> device), prefetches the units the pass uses next, frees
// a unit's slot at release, and checks the order the model acquires and releases units in.
//
// Rules it keeps (docs/sharding.md says the same):
//  - Root unit (Layout::root_unit, the tied embeddings): used first and last by both passes. It is gathered
//    once at the start of forward into its own root slot and stays gathered until its gradient is reduced at
//    the end of backward (FSDP's root-unit rule). So per step it is gathered once, not twice.
//  - The other units share K gather slots sized for the largest of them (--gather-slots, default 2):
//    acquiring unit i waits for its gather and starts the gathers of the units after it in the pass, in the
//    layout's pass order (Layout::pass_order), up to K-1 ahead as slots allow: the unit in use plus K-1 in
//    flight; K = 1 prefetches nothing (prefetch_after states the rule). grad_op has one slot per non-root
//    unit (forward's gathers are kept until backward) and K sets only how far ahead forward prefetches.
//  - Nothing is gathered when G = 1 without offload (EngineGeometry::resident_params): with fp32 compute the
//    model reads the fp32 shards in place (direct params); with bf16 compute every unit keeps a bf16 copy of
//    its parameters (the compute copy, StateStore's param_dev) that AdamW writes with the fp32 master, so
//    acquire returns it at once, with no conversion and no slot.
//  - Offload params: a unit's shard is uploaded (copy stream) into one of the upload stages one unit ahead
//    of the gather that reads it: acquiring the unit at position p of the pass uploads the unit at p+K when
//    G > 1 (whose gather starts at the next acquire), or p+1 when G = 1 (where the "gather" is the conversion
//    into the slot at its own acquire). The compute stream waits for an upload only where that gather or
//    conversion is queued, so the copy runs beside the compute queued before it. At G = 1 the shard is
//    converted straight into the slot (bf16), or in fp32 is the unit itself: the slot and the stage trade
//    buffers, so nothing is copied twice. Stages are the root's and one more than the rotating slots.
//  - A pass acquires its units in Layout::pass_order (the first unit of the order starts a new pass) and
//    releases each before acquiring it again; anything else throws gpt::Error naming the unit.
//
// Adding a buffer: one place, a row in slot_buffers below (see engine_buffers.h).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "src/backend/backend.h"
#include "src/dist/communicator.h"
#include "src/fsdp/geometry.h"
#include "src/fsdp/state_store.h"
#include "src/model/layout.h"

namespace gpt {

class ParamSide {
 public:
  struct Slot {
    void* data = nullptr;        // (slot padded) compute dtype: the gathered unit
    void* stage_c = nullptr;     // (slot shard) compute dtype: the all-gather's input (bf16 compute)
    int owner = -1;              // unit in the slot, -1 when free
  };
  struct Stage {
    float* data = nullptr;  // (max shard; [0] the root's shard) fp32: a shard uploaded from the host
    int owner = -1;         // unit whose upload it holds, -1 when free
  };

  // The rows (engine_buffers.h) of gather slot i ([0] the root's, the others sized for the largest unit).
  template <class F>
  static void slot_buffers(const EngineGeometry& g, int i, F&& f) {
    const int64_t cs = (int64_t)dtype_size(g.compute);
    const OffloadMode off = g.opt.offload;
    constexpr MemDomain dev = MemDomain::device;
    f(BufferSpec{EngineBuffer::slot_data, i, dev, MemCat::gathered_param, cs * g.slot_padded(i)}, &Slot::data);
    if (g.compute != DType::F32 && off != OffloadMode::optimizer && g.group > 1)
      f(BufferSpec{EngineBuffer::slot_stage_c, i, dev, MemCat::workspace, cs * g.slot_shard(i)}, &Slot::stage_c);
  }
  // The rows of upload stage i (offload params: EngineGeometry::upload_stages).
  template <class F>
  static void stage_buffers(const EngineGeometry& g, int i, F&& f) {
    f(BufferSpec{EngineBuffer::upload_stage, i, MemDomain::device, MemCat::host_offload, 4 * g.slot_shard(i)},
      &Stage::data);
  }

  // `changed` is called whenever slot occupancy changes (the trace's counter tracks).
  ParamSide(Backend& be, Communicator& shard_comm, const Layout& layout, const EngineGeometry& geo,
            StateStore& store, std::function<void()> changed);

  const void* acquire(int u, Pass pass);  // the unit's full parameters (compute dtype), valid until release
  void release(int u, Pass pass);
  bool held_in(int u, Pass pass) const { return units_[u].held && units_[u].held_pass == pass; }
  void check_not_held(int u, const char* what) const;  // throws naming `what` when the model holds u
  void reload(int u);  // u's parameters were rewritten: it must not be held; a gather of the old ones is dropped
  void free_all();     // every slot freed: all units sharded
  double bytes_in_use() const;  // gathered parameters in slots

 private:
  enum class State { sharded, gathering, gathered };
  struct UnitParams {
    State state = State::sharded;
    int slot = -1;       // gather slot while gathering or gathered
    int stage = -1;      // upload stage holding its uploaded shard (offload params), -1 when none
    uint64_t upload = 0; // that upload's copy ticket
    WorkPtr gather_work; // in-flight all-gather
    bool held = false;   // acquired and not yet released by the model
    Pass held_pass = Pass::forward;
  };
  static constexpr int kRootSlot = 0;

  bool keeps_after_forward(int u) const;
  void check_acquire_order(int u, Pass pass);
  const void* gather_input(int u, Slot& sl);  // this rank's shard in compute dtype, on the device
  int free_stage() const;                     // a free non-root upload stage, or -1
  void upload(int u);                         // offload params: u's shard to a free stage, on the copy stream
  const float* uploaded(int u);               // compute waits for u's upload (issuing it first if need be)
  void release_stage(int u);
  void start_gather(int u);
  void wait_gather(int u);
  void free_unit(int u);
  int free_rotating_slot() const;             // a free non-root gather slot, or -1
  void prefetch_after(int u, Pass pass);      // fills the prefetch windows after an acquire
  int num_units() const { return (int)units_.size(); }
  const std::string& name(int u) const { return layout_.unit(u).name; }

  Backend& be_;
  Communicator& shard_comm_;
  const Layout& layout_;
  const EngineGeometry& geo_;
  StateStore& store_;
  std::function<void()> changed_;
  std::vector<UnitParams> units_;
  std::vector<Slot> slots_;                 // [kRootSlot] the root unit's, the others rotating
  std::vector<Stage> stages_;               // offload params: [0] the root's, the others any unit's
  std::vector<std::vector<int>> pass_pos_;  // [pass][unit]: the unit's position in Layout::pass_order
  int last_pos_[2] = {-1, -1};              // [pass]: position of the last unit acquired in the pass
};

}  // namespace gpt
