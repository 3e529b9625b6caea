// The FSDP engine: owns this rank's shards of every unit (fp32 param, grad, Adam m and v), gathers a
// unit's full parameters into a fixed pool of slots when the model acquires it, frees them when it is
// released, and reduce-scatters each unit's full gradient into the grad shard as soon as it is ready.
// It implements ParamSource, so the model never sees ranks. What it allocates, and where model states
// live, is decided by its geometry (geometry.h); the states are reached through one Backend (the device,
// or the host side of it when offloaded), so no call below branches on where they are.
//
// Rules worth knowing (docs/sharding.md says the same):
//  - Root unit: `embed` (wte, wpe) is used first (token embedding) and last (tied LM head). It is gathered
//    once at the start of forward into its own root slot and stays gathered until its gradient is
//    reduced at the end of backward (FSDP's root-unit rule). So per step it is gathered once, not twice.
//  - The other units share K gather slots sized for the largest of them (--gather-slots, default 2):
//    acquiring unit i waits for its gather and starts the gathers of the units after it in the pass, in
//    the layout's pass order (Layout::pass_order), up to K-1 ahead as slots allow: the unit in use plus
//    K-1 in flight; K = 1 prefetches nothing (prefetch_after states the rule). grad_op has one slot per
//    unit (forward's gathers are kept until backward) and K sets only how far ahead forward prefetches.
//  - Gradients: a full-unit fp32 grad slot (2 rotating ones + the root's) receives the backward's
//    accumulation; grad_ready starts the reduce-scatter and the result is added to the grad shard once it
//    completes. --no-sync instead accumulates in a persistent full-unit buffer and reduces on the last
//    micro-step only.
//  - The average over ranks is taken once, in fp32: every gradient collective sums (hybrid's replica
//    all-reduce too), and the add into the grad shard divides by the world size. NCCL's own average on bf16
//    pre-multiplies each input by bf16(1/N), which for N = 3 scales every gradient by 3 x bf16(1/3) = 1.002.
//  - --reduce-dtype bf16 (more than one rank): grad_ready rounds the fp32 full gradient to bf16 into the
//    slot's send buffer and reduces that; the bf16 result is widened to fp32 before it is added to the
//    grad shard. The hybrid replica all-reduce runs on the bf16 shard too.
//  - Nothing is gathered when G = 1 without offload: with fp32 compute the model reads the fp32 shards in
//    place (direct params); with bf16 compute (cuda: one GPU, or --shard none) every unit keeps a bf16 copy
//    of its parameters (the compute copy, geometry.h) that AdamW writes in the same pass as the fp32 master
//    (ShardSegment::param_out), so acquire returns it at once, with no conversion and no slot.
//  - Device copies of the params (param_dev: the compute copy, or the gather input under offload optimizer)
//    are refreshed by one mechanism, refresh_device_copy, whenever the fp32 params change by any other way
//    than an update that writes them itself (loading, host AdamW).
//  - The gradient norm (grad_sumsq) sums every unit's grad shard in one Backend::sum_squares_all call: one
//    host wait per step on cuda.
//
// The call order of a step, which the engine checks (a call out of order throws gpt::Error naming the unit):
//   begin_step()                        reshards what forward-only passes (eval, sample) left gathered,
//                                       zeroes the grad shards
//   per micro-step: begin_micro_step(last), the model's forward and backward (ParamSource calls, each pass
//                   acquiring units in Layout::pass_order; grad_buffer only for a unit held in backward)
//   finish_backward()                   every reduction done, grad shards complete
//   grad_sumsq(), update_params(...)    the optimizer; gathered copies of the old params are dropped
// Loading parameters (set_unit_from_host, shard_from_host) drops stale gathers and refreshes device copies
// by itself, so callers never resync the engine.
#pragma once
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "src/backend/backend.h"
#include "src/dist/communicator.h"
#include "src/fsdp/geometry.h"
#include "src/fsdp/options.h"
#include "src/model/layout.h"
#include "src/model/param_source.h"

namespace gpt {

// The four fp32 shards each rank keeps of a unit.
enum class ShardState { param, grad, adam_m, adam_v };

// One contiguous run of this rank's shard that one optimizer call updates. Shards are cut at tensor
// boundaries, so a segment lies in one tensor and takes that tensor's weight decay. Pointers are in the
// states' memory (device, or host when offloaded), n elements each.
struct ShardSegment {
  float* param;
  // The same n parameters in the compute copy (compute dtype, device), or null when there is none: the update
  // must write the updated parameters there too (Backend::adamw_update's param_out), or the model reads stale
  // ones.
  void* param_out;
  const float* grad;
  float* m;
  float* v;
  size_t n;
  bool decay;  // the tensor takes weight decay (matrices and embeddings)
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

  // The step (see the call order above).
  void begin_step();
  void begin_micro_step(bool last_micro_step);  // --no-sync needs to know when to reduce
  void finish_backward();                       // wait for every in-flight reduction (and host grad adds)
  double grad_sumsq();                          // global sum of squares of the reduced gradient
  // Runs `update` on every segment of every shard with the backend that holds the states, then drops the
  // gathered copies of the old parameters and refreshes the device copies (offload optimizer); the compute
  // copy is the update's to write (ShardSegment::param_out).
  void update_params(const std::function<void(Backend& states, const ShardSegment&)>& update);

  const Layout& layout() const { return layout_; }
  const FsdpOptions& options() const { return geo_.opt; }
  const EngineGeometry& geometry() const { return geo_; }
  int num_units() const { return (int)units_.size(); }
  const UnitGeometry& shard(int unit) const { return geo_.units[unit]; }
  Communicator& world() { return world_; }
  int shard_group_size() const { return geo_.group; }
  // Traffic of the engine's collectives (shard group + replica group) since begin_traffic_step().
  CommCounters traffic_step() const;
  void begin_traffic_step();
  // Bytes of model states (param + grad + m + v shards, or param only for inference) this rank holds.
  int64_t model_state_bytes() const { return geo_.state_bytes_per_param() * geo_.shard_elems(); }

  // Whole-unit transfers (init, checkpoints, export). Collective where they say so.
  // The (full, unpadded) fp32 parameters of one unit on the host, gathered from the group (collective).
  std::vector<float> gather_unit_to_host(int unit);
  // Sets this rank's param shard of one unit from a full host copy.
  void set_unit_from_host(int unit, const float* full);
  // Host copies of this rank's shard of one unit (checkpoints, tests).
  void shard_to_host(int unit, ShardState which, std::vector<float>& out);
  void shard_from_host(int unit, ShardState which, const std::vector<float>& in);

 private:
  enum class ParamState { sharded, gathering, gathered };
  // A unit's gradient for the current micro-step: idle until grad_buffer, accumulating until grad_ready. Its
  // reduction is then in flight in a gradient slot (GradSlot::reducing) until complete_reduction.
  enum class GradState { idle, accumulating };
  struct Unit {
    float* param = nullptr;       // (shard) fp32 master, in the states' memory
    float* grad = nullptr;        // (shard) fp32 grad shard
    float* m = nullptr;           // (shard) Adam first moment
    float* v = nullptr;           // (shard) Adam second moment
    void* param_dev = nullptr;    // (shard) compute-dtype device copy: offload optimizer or the compute copy
    float* nosync_acc = nullptr;  // (padded) full-grad accumulator for --no-sync
    ParamState state = ParamState::sharded;
    int slot = -1;                // gather slot while gathering or gathered
    WorkPtr gather_work;          // in-flight all-gather
    bool held = false;            // acquired and not yet released by the model
    Pass held_pass = Pass::forward;
    GradState grad_state = GradState::idle;
  };
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
    WorkPtr replica_work;         // hybrid on a stream-ordered communicator: the replica all-reduce, issued
                                  // right behind the reduce-scatter
    // Offload: the copy of the reduced shard into host_rs runs on the copy stream (Backend::copy_d2h_async).
    uint64_t d2h = 0;             // its ticket
    bool d2h_reads_slot = false;  // compute must wait for it before rewriting the buffers it reads
    int host_unit = -1;           // unit whose host grad shard still needs host_rs added, -1 when none
  };
  // construction (engine.cpp)
  void allocate();
  template <typename F>
  void with_buffer(const BufferSpec& b, F&& f);
  Backend& owner(const BufferSpec& b);  // the backend a buffer's domain belongs to
  // the step (engine_step.cpp)
  bool keeps_after_forward(int unit) const;
  void check_acquire_order(int unit, Pass pass);
  void start_gather(int unit);
  void wait_gather(int unit);
  void free_unit(int unit);
  void free_all_units();
  int free_rotating_slot() const;  // a free non-root gather slot, or -1
  void prefetch_after(int unit, Pass pass);  // fills the prefetch window after an acquire
  int take_grad_slot(int unit);
  void complete_reduction(GradSlot& gs);
  float* reduced_f32(GradSlot& gs);  // the finished reduction as fp32 on the device (widened from bf16)
  float grad_ranks() { return (float)world_.world(); }  // ranks whose gradients the collectives sum
  void finish_host_grad(GradSlot& gs);     // host: wait for the slot's d2h copy, add it into the grad shard
  void release_copy_source(GradSlot& gs);  // compute: wait for the slot's d2h copy before reusing its buffers
  void wait_host_copies();                 // the host waits for every offload copy issued so far
  void refresh_device_copy(int unit);      // param_dev <- param (offload optimizer, compute copy)
  uint64_t track(uint64_t ticket) { return last_copy_ = ticket ? ticket : last_copy_; }
  void trace_counters();  // slot occupancy and bytes in flight, for the trace's counter tracks
  void check_quiet(const char* what) const;  // nothing held, no gradient open or in flight, or throw
  void check_trains(const char* what) const;  // an engine with gradients (not inference), or throw
  float* state_ptr(int unit, ShardState which);
  void write_shard(int unit, ShardState which, const float* in /*(shard_numel)*/);  // shard_from_host's work
  const std::string& name(int unit) const { return layout_.unit(unit).name; }

  Backend& be_;                      // compute: gathers, gradients, everything the model touches
  std::unique_ptr<Backend> host_;    // the host side of be_ (pinned on cuda): offloaded states, host copies
  Backend* states_ = nullptr;        // where the fp32 model states live: &be_, or host_ when offloaded
  Communicator& world_;
  Layout layout_;
  std::unique_ptr<Communicator> shard_comm_;    // ranks sharing a unit's shards (size G)
  std::unique_ptr<Communicator> replica_comm_;  // ranks holding the same shard (size N/G)
  EngineGeometry geo_;
  std::vector<Unit> units_;
  std::vector<Slot> slots_;       // [0] is the root slot, [1..] the rotating ones
  std::vector<GradSlot> gslots_;  // [0] root, [1..] rotating
  std::deque<int> pending_;       // grad slots with reductions in flight, oldest first
  float* refresh_stage_ = nullptr;  // (max shard) fp32 device staging to refresh param_dev (offload=optimizer)
  std::vector<std::vector<int>> pass_pos_;  // [pass][unit]: the unit's position in Layout::pass_order
  int last_pos_[2] = {-1, -1};              // [pass]: position of the last unit acquired in the pass
  bool last_micro_ = true;
  uint64_t last_copy_ = 0;  // ticket of the newest offload copy (copies complete in issue order)
};

}  // namespace gpt
