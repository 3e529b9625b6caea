// See timemodel.h: the prediction is one simulated step (src/sim/sim_step.h), summarised.
#include "src/plan/timemodel.h"

#include <chrono>

#include "src/core/check.h"
#include "src/sim/sim_step.h"

namespace gpt {

TimePlan plan_time(const TimeModelInput& in, const HardwareSpec& hw) {
  GPT_CHECK(in.grad_accum >= 1, "time model: gradient accumulation must be >= 1, got ", in.grad_accum);
  sim::SimRun run;
  run.run = in.run;
  run.grad_accum = in.grad_accum;
  run.ranks_per_node = in.ranks_per_node;
  run.threads_per_rank = in.threads_per_rank;
  run.hw = &hw;
  run.trace_path = in.trace_path;
  run.memory_planned = in.memory_planned;
  const auto t0 = std::chrono::steady_clock::now();
  const sim::SimResult r = sim::simulate_step(run);
  const double plan_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  TimePlan plan;
  plan.step_s = r.step_s;
  using sim::Phase;
  auto ph = [&](Phase p) { return r.phases[(int)p]; };
  plan.phases.forward = ph(Phase::forward);
  plan.phases.recompute = ph(Phase::recompute);
  plan.phases.backward = ph(Phase::backward);
  plan.phases.engine = ph(Phase::engine);
  plan.phases.copies = ph(Phase::copies);
  plan.phases.exposed_comm = ph(Phase::exposed_comm);
  plan.phases.optimizer = ph(Phase::optimizer);
  plan.phases.host_wait = ph(Phase::host_wait);
  plan.compute_s = plan.phases.forward + plan.phases.recompute + plan.phases.backward;
  plan.comm_s = r.comm_s;
  plan.gather_s = r.gather_s;
  plan.timed_calls = r.timed_calls;
  plan.longest_stretch_s = r.longest_stretch_s;
  plan.exposed_comm_s = plan.phases.exposed_comm;
  plan.bytes = r.bytes;
  plan.calls = r.calls;
  plan.tp_bytes = r.tp_bytes;
  plan.tp_calls = r.tp_calls;
  plan.gathers_ahead = r.gathers_ahead;
  plan.units.reserve(r.units.size());
  for (const sim::SimUnit& u : r.units) plan.units.push_back({u.name, u.forward, u.recompute, u.backward});
  plan.profile = r.profile;
  plan.network = r.network;
  plan.notes = r.notes;
  plan.trace_path = in.trace_path;
  plan.plan_s = plan_s;
  plan.device_peak = r.device_peak;
  plan.host_peak = r.host_peak;
  const GPTConfig& cfg = in.run.cfg;
  // the ranks of a tensor-parallel group share their sequences
  const double tokens = (double)in.run.B * in.run.T * (in.run.world / in.run.tp.size) * in.grad_accum;
  plan.tokens_per_s = plan.step_s > 0 ? tokens / plan.step_s : 0;
  const double n = (double)(cfg.num_params() - (int64_t)cfg.max_seq_len * cfg.channels);
  plan.model_flops_per_token = 6.0 * n + 12.0 * cfg.num_layers * cfg.channels * in.run.T;
  plan.peak_flops = r.peak_flops;
  plan.mfu = plan.tokens_per_s * plan.model_flops_per_token / (plan.peak_flops * in.run.world);
  plan.hardware_flops = r.hardware_flops;
  if (!hw.overlap && in.run.world > 1)
    plan.notes.push_back("collectives progress only inside wait() (network.overlap false): every byte is exposed");
  return plan;
}

}  // namespace gpt
