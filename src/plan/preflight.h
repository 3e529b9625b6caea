// Pre-flight: before a command allocates its model, its memory plan (memplan.h, the same code as
// `gpt memplan`) is set against what the machine can give, and a run that cannot fit is refused with one
// line: the need and the availability per domain, and the cheapest lever that would make it fit, itself
// checked with the planner. Pure arithmetic: the caller reads the availability (util/host_memory.h, the
// backend's free device memory) and the collective agreement is the caller's too.
//
// What must fit, per rank and per node:
//  - cpu backend: the device and host domains are both this node's RAM, and every rank of the run on the
//    node draws from it: ranks_per_node x (device peak + host peak) against the host's availability;
//  - cuda backend: the device peak against the rank's free device memory, and ranks_per_node x host peak
//    (pinned buffers of offload) against the host's availability.
// Each need gets a margin for what the ledger does not see (allocator rounding, library buffers, the
// program itself): `margin` of the need plus `margin_bytes`.
//
// Levers, cheapest first (the measured costs of each are in docs/performance.md): recompute
// selective (no slower), --shard full at the same ranks (more traffic, overlapped), offload optimizer
// (cuda), offload params (cuda), recompute full, then these together, then smaller micro-batches (the
// global batch kept by accumulation), and last more ranks with --shard full. On the cpu backend offload
// only moves bytes between two domains of the same RAM, so it is never offered there.
#pragma once
#include <cstdint>
#include <string>

#include "src/plan/memplan.h"

namespace gpt {

struct MemoryAvailable {
  int64_t host = INT64_MAX;   // bytes the host can still give this node's ranks
  std::string host_source;    // which limit that is (util/host_memory.h)
  int64_t device = -1;        // bytes free on this rank's device; -1 when the device domain is host memory (cpu)
};

struct PreflightSpec {
  MemPlanInput run;                       // the run as launched
  int ranks_per_node = 1;                 // ranks of the run sharing this node's host memory
  double margin = 0.05;                   // fraction of each need added as headroom
  int64_t margin_bytes = int64_t{256} << 20;  // and a fixed headroom per rank
};

struct PreflightNeed {
  int64_t host = 0;    // bytes needed from the host, margin included (all of the node's ranks)
  int64_t device = 0;  // bytes needed per device, margin included (0 when the device domain is host memory)
  bool fits = false;
};

// bytes plus the spec's margin (saturating).
int64_t preflight_with_margin(int64_t bytes, const PreflightSpec& spec);

// The need of one run (spec.run) against the availability. Throws the planner's errors for invalid input.
PreflightNeed preflight_need(const PreflightSpec& spec, const MemoryAvailable& avail);

struct Lever {
  std::string flags;  // what to change, as flags ("--recompute full -B 2 --total-batch 4096")
  PreflightNeed need; // the plan with the lever applied
};
// The cheapest lever that makes the run fit, or flags == "" when none does.
Lever cheapest_lever(const PreflightSpec& spec, const MemoryAvailable& avail);

// Throws gpt::Error with one line when the run does not fit: need and availability per domain, and the
// lever (or that none fits). `what` names the command ("train", "bench", ...).
void preflight_check(const PreflightSpec& spec, const MemoryAvailable& avail, const std::string& what);

}  // namespace gpt
