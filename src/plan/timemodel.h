// The time model behind `gpt memplan --time`: one rank's training step, predicted before launching, by
// running it: the real model and FSDP engine execute one step on the simulated machine (src/sim/sim_step.h),
// whose backend prices every op (src/plan/op_costs.h at src/plan/rank_rates.h's rates) and whose
// communicators price every collective (src/plan/collectives.h) on a hardware file (src/plan/hardware.h),
// each placed on the stream it would run on. The schedule (prefetch depth, gradient slots, hybrid's shared
// comm stream, offload copies, MPI's progress inside waits) is the engine's; nothing here restates it.
//
// Bytes: every collective is recorded in the simulated communicators' ledger exactly as the real ones record
// it, so the per-kind totals equal the communication ledger's by construction
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
  std::string trace_path;      // --trace FILE: the simulated step as a Perfetto trace, in simulated time
  bool memory_planned = false; // as SimRun's: the caller holds this run's memory plan, sizes below 2^63 bytes
};

// Seconds of one phase of the step on the compute timeline.
struct StepPhases {
  double forward = 0, recompute = 0, backward = 0;  // model ops (recompute: the re-run forwards)
  double engine = 0;     // the engine's own memory work: zeroing, local gathers, shard adds, conversions
  double copies = 0;     // host <-> device copies on the critical timeline, or waiting for them (offload)
  double exposed_comm = 0;  // waiting for collectives (and the loss's and norm's scalar reductions)
  double optimizer = 0;  // gradient norm, AdamW (on the host with offload)
  double host_wait = 0;  // the device idle for the host (GPU: its adds, its issue, the final sync)
};

struct UnitTime {
  std::string name;
  double forward = 0, recompute = 0, backward = 0;  // per step (every micro-step), seconds
};

struct TimePlan {
  double step_s = 0;              // one optimizer step
  StepPhases phases;              // sums to step_s
  double compute_s = 0;           // forward + recompute + backward
  double comm_s = 0;              // all collective time (hidden or not)
  double gather_s = 0;            // of which all-gathers (the engine's, and the group's under SP)
  int64_t timed_calls = 0;        // collectives that take time, of every group (scalar helpers not counted)
  // The most forward + recompute + backward the compute stream runs between two of its waits on a collective
  // it issued and waited for at once, the first stretch and the last together (sim::Timeline::longest_stretch)
  double longest_stretch_s = 0;
  double exposed_comm_s = 0;      // = phases.exposed_comm
  double tokens_per_s = 0;        // global: B*T*N*accum / step_s
  double model_flops_per_token = 0;  // Trainer::flops_per_token (6n + 12 L C T)
  double mfu = 0;                 // tokens_per_s * flops_per_token / (peak * N)
  double hardware_flops = 0;      // products actually computed per rank per step (recompute included)
  double peak_flops = 0;          // per rank, from the hardware file (and the CPU profile used)
  std::array<int64_t, kCollKinds> bytes{};  // per rank per step, ring accounting (== the ledger)
  std::array<int64_t, kCollKinds> calls{};  // collectives per kind per step (scalar helpers not counted)
  std::array<int64_t, kCollKinds> tp_bytes{}, tp_calls{};  // the tensor-parallel group's, apart (the model's)
  std::vector<UnitTime> units;
  // Per acquire of the step, in call order (every micro-step): the all-gathers in flight beyond the acquired
  // unit once its prefetch window is filled, which the engine's trace shows while that unit computes.
  std::vector<int> gathers_ahead;
  std::string trace_path;         // where the simulated step's trace was written ("" for none)
  double plan_s = 0;              // wall time the simulated step took to run (the planner's own cost)
  int64_t device_peak = 0, host_peak = 0;  // the simulated step's memory ledger (= plan_memory's peaks)
  std::string profile;            // which compute profile priced the ops ("2 ranks x 1 thread ...")
  std::string network;            // which links priced the collectives
  std::vector<std::string> notes; // approximations taken for this input (a profile scaled, defaults...)
};

// Throws gpt::Error for an invalid input (as plan_memory does) or a hardware file that cannot price it
// (a cpu file for a bf16 run and the reverse).
TimePlan plan_time(const TimeModelInput& in, const HardwareSpec& hw);

}  // namespace gpt
