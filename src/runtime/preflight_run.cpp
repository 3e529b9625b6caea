// See preflight_run.h.
#include "src/runtime/preflight_run.h"

#include <cstdio>

#include "src/dist/collective_check.h"
#include "src/plan/preflight.h"
#include "src/util/host_memory.h"
#include "src/util/log.h"

namespace gpt {

namespace {
MemoryAvailable available(const Backend& backend) {
  const HostMemory h = host_memory_available();
  MemoryAvailable a;
  a.host = h.available;
  a.host_source = h.source;
  a.device = backend.device_info().device_memory_free();
  return a;
}
}  // namespace

void preflight(Communicator& world, const Backend& backend, const MemPlanInput& run, const std::string& what, bool skip,
               bool report) {
  MemPlan plan;
  collective_check(world, "memory plan", [&] { plan = plan_memory(run); });
  if (report) {
    log_rank0(world, what, ": B=", run.B, " T=", run.T, " on ", run.world, " rank(s), ", run.cfg.describe(),
              " | memory plan per rank (as gpt memplan): device ", format_bytes(plan.device_peak), ", host ",
              format_bytes(plan.host_peak), skip ? " | pre-flight check skipped (--no-preflight)" : "");
    std::fflush(stdout);
  }
  if (skip) return;
  PreflightSpec spec;
  spec.run = run;
  spec.ranks_per_node = world.local_size();
  collective_check(world, "pre-flight", [&] { preflight_check(spec, available(backend), what); });
}

void preflight_host_bytes(Communicator& world, int64_t bytes, const std::string& what, bool skip) {
  if (skip) return;
  collective_check(world, "pre-flight", [&] {
    const HostMemory h = host_memory_available();
    const int64_t need = preflight_with_margin(bytes, PreflightSpec{});
    GPT_CHECK(need <= h.available, what, ": needs ", format_bytes(need), " of host memory (margin included), ",
              format_bytes(h.available), " available (", h.source, "); --no-preflight skips this check");
  });
}

}  // namespace gpt
