// The time model behind `gpt memplan --time`: one rank's training step, predicted before launching, by
// replaying the engine's schedule (src/fsdp/engine_step.cpp) over priced ops (src/plan/op_costs.h) and
// priced collectives (src/plan/collectives.h) on a hardware file (src/plan/hardware.h).
//
// What is replayed, in the engine's order:
//  - per micro-step: the root unit (embed) gathered once at the start of forward and kept to the end of
//    backward; the other units acquired in Layout::pass_order, each acquire waiting for its gather and
//    starting those of the units after it, up to K-1 ahead while rotating gather slots are free (K =
//    --gather-slots; K = 1 prefetches nothing; never with a shard group of 1, where a "gather" is a local
//    copy); full frees a unit after forward and gathers it again for backward, grad_op keeps forward's
//    gather (one gather per unit), none reads the shards;
//  - recompute: before a unit's backward, the re-run forward of the fields its layer does not keep;
//  - gradients: a fresh full-unit gradient slot is zeroed, the unit's backward accumulates into it, and
//    grad_ready starts its reduce-scatter (none: all-reduce; --reduce-dtype bf16: after rounding); with
//    two rotating slots, taking a slot completes the oldest reduction first (wait, hybrid's replica
//    all-reduce, the add into the grad shard or its copy to the host); --no-sync reduces on the last
//    micro-step only; finish_backward completes the rest;
//  - the step's end: loss and gradient-norm all-reduces, AdamW over the shards (on the host with
//    offload), the device copies of the params refreshed (offload optimizer).
// Channels: the compute stream; one FIFO per communicator (the shard group's and the replica group's);
// on a GPU the copy stream and the host thread too. With overlap (NCCL) a collective runs from
// max(issue, channel free) and a wait stalls compute only for what is left. Without it (OpenMPI, whose
// nonblocking collectives progress only inside MPI calls) all collectives queue in one FIFO that advances
// only while a rank waits: every byte is exposed, in the order it was started.
//
// Bytes: every collective's bytes are the ring accounting of src/dist/comm_volume.h for the call the
// engine makes (count, dtype, group), so the per-kind totals equal the communication ledger's
// (tests/fsdp/test_time_model_ledger.cpp holds them equal under mpiexec -n 1..4).
//
// What it leaves out (docs/results/time_model/README.md): compute slowed by concurrent communication
// (SM or core sharing), skew between ranks, stragglers, allocator stalls, data loading, launch gaps
// beyond the per-op overhead, the host's own issue rate, and the progress MPI makes outside wait().
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "src/dist/comm_ledger.h"
#include "src/plan/hardware.h"
#include "src/plan/memplan.h"

namespace gpt {

struct TimeModelInput {
  MemPlanInput run;            // model, world, sharding, recompute, offload, B, T, compute dtype, attention
  int grad_accum = 1;          // micro-steps per optimizer step (--total-batch / (B*T*N))
  int ranks_per_node = 0;      // 0: min(world, the hardware's devices_per_node)
  int threads_per_rank = 0;    // CPU: 0 = max(1, cores / ranks_per_node) (how scripts launch ranks)
};

// Seconds of one phase of the step on the compute timeline.
struct StepPhases {
  double forward = 0, recompute = 0, backward = 0;  // model ops (recompute: the re-run forwards)
  double engine = 0;     // the engine's own memory work: local gathers, slot fills, shard adds, conversions
  double copies = 0;     // host <-> device copies on the compute timeline (offload)
  double exposed_comm = 0;  // waiting for collectives
  double optimizer = 0;  // zeroing grads, gradient norm, AdamW, refreshing device copies
  double host_wait = 0;  // waiting for the host's adds and copies (GPU offload)
};

struct UnitTime {
  std::string name;
  double forward = 0, recompute = 0, backward = 0;  // per micro-step, seconds
  double gather = 0;      // one all-gather of the unit (0 when nothing is communicated)
  double reduce = 0;      // its gradient reduction (reduce-scatter or all-reduce; + hybrid's all-reduce)
};

struct TimePlan {
  double step_s = 0;              // one optimizer step
  StepPhases phases;              // sums to step_s
  double compute_s = 0;           // forward + recompute + backward
  double comm_s = 0;              // all collective time (hidden or not)
  double exposed_comm_s = 0;      // = phases.exposed_comm
  double tokens_per_s = 0;        // global: B*T*N*accum / step_s
  double model_flops_per_token = 0;  // Trainer::flops_per_token (6n + 12 L C T)
  double mfu = 0;                 // tokens_per_s * flops_per_token / (peak * N)
  double hardware_flops = 0;      // products actually computed per rank per step (recompute included)
  double peak_flops = 0;          // per rank, from the hardware file (and the CPU profile used)
  std::array<int64_t, kCollKinds> bytes{};  // per rank per step, ring accounting (== the ledger)
  std::array<int64_t, kCollKinds> calls{};  // collectives per kind per step (scalar helpers not counted)
  std::vector<UnitTime> units;
  // Per acquire of the step, in call order (every micro-step): the all-gathers in flight beyond the acquired
  // unit once its prefetch window is filled, which the engine's trace shows while that unit computes.
  std::vector<int> gathers_ahead;
  std::string profile;            // which compute profile priced the ops ("2 ranks x 1 thread ...")
  std::string network;            // which links priced the collectives
  std::vector<std::string> notes; // approximations taken for this input (a profile scaled, defaults...)
};

// Throws gpt::Error for an invalid input (as plan_memory does) or a hardware file that cannot price it
// (a cpu file for a bf16 run and the reverse).
TimePlan plan_time(const TimeModelInput& in, const HardwareSpec& hw);

}  // namespace gpt
