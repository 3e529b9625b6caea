// One training step of the real model through the real FSDP engine and the shared step function
// (src/train/train_step.h), on the simulated machine: the planner behind `gpt memplan`, `gpt memplan --time`
// (and --trace), the start-up traffic line and the pre-flight check. What the step allocates is read off the
// memory ledger; what it sends, off the communication ledger; when it runs, off the timeline. Nothing here
// states the schedule: changing the engine changes the plan.
#pragma once
#include <array>
#include <string>
#include <vector>

#include "src/backend/ledger.h"
#include "src/dist/comm_ledger.h"
#include "src/plan/hardware.h"
#include "src/plan/memplan.h"
#include "src/sim/timeline.h"

namespace gpt::sim {

struct SimRun {
  // With fsdp.inference, eval's forward-only pass instead of a training step (sampling is not simulated).
  MemPlanInput run;             // model, world, sharding, recompute, offload, B, T, compute dtype, attention
  int grad_accum = 1;           // micro-steps per optimizer step
  int ranks_per_node = 0;       // 0: min(world, the hardware's devices_per_node), or the world without one
  int threads_per_rank = 0;     // CPU: 0 = max(1, cores / ranks_per_node)
  const HardwareSpec* hw = nullptr;  // null: memory only (every op and collective costs 0)
  std::string trace_path;       // a Perfetto trace of the simulated step, in simulated time ("" for none)
  // The caller computed this run's memory plan and every size in it is below 2^63 bytes (gpt plan's search
  // does for each candidate it prices): the step does not repeat memory_from_geometry's validation.
  bool memory_planned = false;
};

struct SimUnit {
  std::string name;
  double forward = 0, recompute = 0, backward = 0;  // seconds per step (all micro-steps)
};

struct SimResult {
  // memory: the ledger after the step (within a step nothing is freed, so what is live is the peak)
  std::array<MemBreakdown, kMemDomains> peak{};
  int64_t device_peak = 0, host_peak = 0;
  // traffic: the communication ledger's bytes and calls per kind: the engine's (its shard and replica groups)
  // and, with tensor parallelism, the tensor-parallel group's apart
  std::array<int64_t, kCollKinds> bytes{}, calls{};
  std::array<int64_t, kCollKinds> tp_bytes{}, tp_calls{};
  // time (all 0 without a hardware file)
  double step_s = 0;
  std::array<double, kPhases> phases{};  // sums to step_s
  double comm_s = 0;                     // in collectives, hidden or not
  double gather_s = 0;                   // of which all-gathers (the engine's, and the group's under SP)
  int64_t timed_calls = 0;               // the collectives that take time, of every group
  double longest_stretch_s = 0;          // Timeline::longest_stretch (where collectives overlap compute)
  double hardware_flops = 0;             // products computed per step (recompute included)
  std::vector<SimUnit> units;
  std::vector<int> gathers_ahead;        // per acquire: all-gathers in flight after it
  double peak_flops = 0;                 // per rank, from the hardware file (and the CPU profile used)
  std::string profile, network;          // which rates priced it
  std::vector<std::string> notes;
  int ranks_per_node = 1;
};

// The start-up report's traffic line: the simulated step's bytes per rank per kind, as the ledger counts.
std::string traffic_line(const SimResult& r, int grad_accum);

// Throws gpt::Error for an invalid run (validate_plan_input's messages, the engine's own checks).
SimResult simulate_step(const SimRun& run);

}  // namespace gpt::sim
