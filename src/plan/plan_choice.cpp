// See plan_choice.h.
#include "src/plan/plan_choice.h"

#include "src/core/check.h"

namespace gpt {

std::string PlanChoice::flags(int T, int64_t total_batch) const {
  std::string s;
  if (tp.size > 1) s = str("--tp ", tp.size, tp.sequence_parallel ? " " : " --sequence-parallel off ");
  s += str("--shard ", FsdpOptions::name(strategy));
  if (strategy == ShardStrategy::hybrid) s += str(" --shard-group ", shard_group);
  s += str(" --recompute ", recompute.str(), " --offload ", offload.str(), " --wrap ", wrap.str(), " --gather-slots ",
           gather_slots, " -B ", B, " -T ", T, " --total-batch ", total_batch, " --reduce-dtype ",
           FsdpOptions::reduce_dtype_name(reduce));
  if (no_sync) s += " --no-sync";
  return s;
}

std::string PlanChoice::mesh(int world) const {
  if (tp.size == 1) return str("dp ", world);
  return str("tp ", tp.size, tp.sequence_parallel ? " (sequence parallel)" : "", " x dp ", world / tp.size);
}

bool PlanChoice::operator==(const PlanChoice& o) const {
  return tp == o.tp && strategy == o.strategy && shard_group == o.shard_group && recompute.mode == o.recompute.mode &&
         recompute.every_k == o.recompute.every_k && offload.states == o.offload.states &&
         offload.activations == o.offload.activations && wrap == o.wrap && gather_slots == o.gather_slots && B == o.B &&
         accum == o.accum && reduce == o.reduce && no_sync == o.no_sync;
}

MemPlanInput PlanChoice::apply(MemPlanInput in) const {
  in.tp = tp;
  in.fsdp.strategy = strategy;
  in.fsdp.shard_group = strategy == ShardStrategy::hybrid ? shard_group : 0;
  in.fsdp.gather_slots = gather_slots;
  in.fsdp.no_sync = no_sync;
  in.fsdp.offload = offload.states;
  in.fsdp.reduce_dtype = reduce;
  in.offload_activations = offload.activations;
  in.recompute = recompute;
  in.wrap = wrap;
  in.B = B;
  return in;
}

}  // namespace gpt
