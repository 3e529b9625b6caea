// The FSDP engine: owns this rank's shards of every unit (fp32 param, grad, Adam m and v), gathers a
// unit's full parameters into a fixed pool of slots when the model acquires it, frees them when it is
// released, and reduce-scatters each unit's full gradient into the grad shard as soon as it is ready.
// It implements ParamSource, so the model never sees ranks.
//
// Rules worth knowing (README "Sharding" says the same):
//  - Root unit: `embed` (wte, wpe) is used first (token embedding) and last (tied LM head). It is gathered
//    once at the start of forward into its own root slot and stays gathered until its gradient is
//    reduced at the end of backward (FSDP's root-unit rule). So per step it is gathered once, not twice.
//  - The other units share K gather slots sized for the largest of them (--gather-slots, default 2):
//    acquiring unit i waits for its gather and starts the prefetch of the next unit of the pass.
//  - Gradients: a full-unit fp32 grad slot (2 rotating ones + the root's) receives the backward's
//    accumulation; grad_ready starts the reduce-scatter (average over ranks) and the result is added to
//    the grad shard once it completes. --no-sync instead accumulates in a persistent full-unit buffer and
//    reduces on the last micro-step only.
//  - --reduce-dtype bf16 (more than one rank): grad_ready rounds the fp32 full gradient to bf16 into the
//    slot's send buffer and reduces that; the bf16 result is widened to fp32 before it is added to the
//    grad shard. The hybrid replica all-reduce runs on the bf16 shard too.
//  - Each unit is padded to a multiple of the shard-group size; rank r owns the contiguous slice r.
#pragma once
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "src/backend/backend.h"
#include "src/dist/communicator.h"
#include "src/fsdp/options.h"
#include "src/model/layout.h"
#include "src/model/param_source.h"

namespace gpt {

struct UnitShard {
  int64_t numel = 0;       // real elements of the unit
  int64_t padded = 0;      // numel rounded up to a multiple of the shard-group size
  int64_t shard_numel = 0; // padded / group size
  int64_t shard_offset = 0;  // first element of this rank's slice in the unit's flat index
  float* param = nullptr;  // (shard_numel) fp32 master: device, or host with offload
  float* grad = nullptr;   // (shard_numel) fp32 grad shard, same domain as param
  float* m = nullptr;      // (shard_numel) Adam first moment
  float* v = nullptr;      // (shard_numel) Adam second moment
  void* param_dev = nullptr;    // (shard_numel) compute-dtype device copy (offload=optimizer only)
  float* nosync_acc = nullptr;  // (padded) full-grad accumulator for --no-sync
  // gather state
  int slot = -1;           // index into the slot pool, -1 when not gathered
  bool gathered = false;   // the slot holds this unit's current parameters (after wait)
  WorkPtr gather_work;     // in-flight all-gather
};

class FsdpEngine : public ParamSource {
 public:
  FsdpEngine(Backend& be, Communicator& world, const Layout& layout, const FsdpOptions& opt);
  ~FsdpEngine() override;

  // ParamSource
  const void* acquire(int unit, Pass pass) override;
  void release(int unit, Pass pass) override;
  float* grad_buffer(int unit) override;
  void grad_ready(int unit) override;

  // Training-loop hooks.
  void begin_micro_step(bool last_micro_step);  // --no-sync needs to know when to reduce
  void finish_backward();                       // wait for every in-flight reduction (and host grad adds)
  void wait_host_copies();                      // the host waits for every offload copy issued so far
  void zero_grad_shards();
  void on_params_updated();                     // the optimizer changed the shards: drop stale gathers
  double grad_sumsq();                          // global sum of squares of the reduced gradient

  const Layout& layout() const { return layout_; }
  const FsdpOptions& options() const { return opt_; }
  int num_units() const { return (int)units_.size(); }
  UnitShard& unit(int u) { return units_[u]; }
  bool host_states() const { return opt_.offload != OffloadMode::none; }
  Communicator& world() { return world_; }
  Communicator& shard_comm() { return *shard_comm_; }
  int shard_group_size() const { return group_; }
  // Traffic of the engine's collectives (shard group + replica group) since begin_traffic_step().
  CommCounters traffic_step() const;
  void begin_traffic_step();
  // Bytes of model states (param + grad + m + v shards) this rank holds, for the report.
  int64_t model_state_bytes() const;
  // Copy the (full, unpadded) fp32 parameters of one unit to the host, gathering from all ranks.
  std::vector<float> gather_unit_to_host(int unit);
  // Set this rank's shards of one unit from a full host copy (init, load).
  void set_unit_from_host(int unit, const float* full);
  // Host copies of this rank's shard of one unit: which = 0 param, 1 Adam m, 2 Adam v (checkpoints).
  void shard_to_host(int unit, int which, std::vector<float>& out);
  void shard_from_host(int unit, int which, const std::vector<float>& in);
  // After set_unit_from_host / optimizer on host: refresh the device copies (offload=optimizer).
  void sync_device_copies();

 private:
  struct Slot {
    void* data = nullptr;         // (max padded) compute dtype: the gathered unit
    float* stage_f32 = nullptr;   // (max shard) offload=params: H2D staging of the fp32 shard
    void* stage_c = nullptr;      // (max shard) compute-dtype shard, the all-gather's input
    int owner = -1;
  };
  struct GradSlot {
    float* data = nullptr;        // (max padded) fp32 full-unit gradient
    float* rs_out = nullptr;      // (max shard) reduce-scatter output
    float* host_rs = nullptr;     // (max shard, or max padded when unsharded) host copy for offload
    float* src = nullptr;         // what is being reduced: data, or the unit's --no-sync accumulator
    void* send_bf16 = nullptr;    // (max padded) bf16: src rounded, the reduction's input (in place when G = 1)
    void* recv_bf16 = nullptr;    // (max shard) bf16: reduce-scatter output (G > 1)
    int owner = -1;               // unit using the slot, -1 when free
    bool reducing = false;        // its reduction is in flight (listed in pending_)
    WorkPtr work;
    // Offload: the copy of the reduced shard into host_rs runs on the copy stream (Backend::copy_d2h_async).
    uint64_t d2h = 0;             // its ticket
    bool d2h_reads_slot = false;  // compute must wait for it before rewriting the buffers it reads
    int host_unit = -1;           // unit whose host grad shard still needs host_rs added, -1 when none
  };
  bool direct_params() const;
  bool direct_grads() const;
  bool bf16_reduce() const;  // gradients travel in bf16 (--reduce-dtype bf16 and something to communicate)
  bool keeps_after_forward(int unit) const;
  Slot& slot_for(int unit);
  void start_gather(int unit);
  void wait_gather(int unit);
  void free_unit(int unit);
  void prefetch_after(int unit, Pass pass);
  int take_grad_slot(int unit);
  void complete_reduction(GradSlot& gs);
  float* reduced_f32(GradSlot& gs);  // the finished reduction as fp32 on the device (widened from bf16)
  void finish_host_grad(GradSlot& gs);     // host: wait for the slot's d2h copy, add it into the grad shard
  void release_copy_source(GradSlot& gs);  // compute: wait for the slot's d2h copy before reusing its buffers
  uint64_t track(uint64_t ticket) { return last_copy_ = ticket ? ticket : last_copy_; }
  void add_reduced_shard(int unit, float* reduced_dev, GradSlot& gs);
  void trace_counters();  // slot occupancy and bytes in flight, for the trace's counter tracks
  void allocate_states();
  void allocate_pools();
  float* alloc_state(int64_t n, MemCat cat);

  Backend& be_;
  Communicator& world_;
  Layout layout_;
  FsdpOptions opt_;
  int group_ = 1;  // shard-group size G
  std::unique_ptr<Communicator> shard_comm_;    // ranks sharing a unit's shards (size G)
  std::unique_ptr<Communicator> replica_comm_;  // ranks holding the same shard (size N/G)
  std::vector<UnitShard> units_;
  std::vector<Slot> slots_;       // [0] is the root slot, [1..] the rotating ones
  std::vector<GradSlot> gslots_;  // [0] root, [1..] rotating
  std::deque<int> pending_;       // grad slots with reductions in flight, oldest first
  float* refresh_stage_ = nullptr;  // (max shard) fp32 device staging to refresh param_dev (offload=optimizer)
  bool last_micro_ = true;
  uint64_t last_copy_ = 0;  // ticket of the newest offload copy (copies complete in issue order)
};

}  // namespace gpt
