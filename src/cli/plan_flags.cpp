// See plan_flags.h.
#include "src/cli/plan_flags.h"

#include <algorithm>

#include "src/core/check.h"
#include "src/util/host_memory.h"

namespace gpt {

PlanPins parse_plan_pins(Flags& f) {
  PlanPins p;
  if (f.has("--tp")) p.tp = f.i32("--tp", 1, 1, 1 << 20);
  if (f.has("--sequence-parallel")) {  // on or off, and on only with more than one rank per group
    const TpOptions tp = TpOptions::parse(p.tp.value_or(2), f.str("--sequence-parallel", ""));
    p.sequence_parallel = tp.sequence_parallel;
  }
  if (f.has("--shard")) p.strategy = FsdpOptions::parse_strategy(f.str("--shard", "full"));
  if (f.has("--shard-group")) p.shard_group = f.i32("--shard-group", 0, 1, 1 << 20);
  if (f.has("--recompute")) p.recompute = RecomputePolicy::parse(f.str("--recompute", "none"));
  if (f.has("--offload")) p.offload = OffloadSet::parse(f.str("--offload", "none"));
  if (f.has("--wrap")) p.wrap = WrapPolicy::parse(f.str("--wrap", "block"));
  if (f.has("--gather-slots")) p.gather_slots = f.i32("--gather-slots", 2, 1, 64);
  if (f.has("-B")) p.B = f.i32("-B", 4, 1, 1 << 20);
  if (f.has("--reduce-dtype")) p.reduce = FsdpOptions::parse_reduce_dtype(f.str("--reduce-dtype", "fp32"));
  if (f.has("--no-sync")) p.no_sync = f.on("--no-sync");
  GPT_CHECK(!p.shard_group || !p.strategy || *p.strategy == ShardStrategy::hybrid,
            "--shard-group is only for --shard hybrid");
  if (p.shard_group) p.strategy = ShardStrategy::hybrid;
  return p;
}

PlanBudget parse_plan_budget(const std::string& text, const HardwareSpec& hw, int ranks_per_node) {
  PlanBudget b;
  b.one_ram = hw.kind == "cpu";
  if (text.empty()) {
    if (b.one_ram) {
      const HostMemory h = host_memory_available();
      b.device = h.available == INT64_MAX ? -1 : h.available / std::max(1, ranks_per_node);
    } else {
      GPT_CHECK(hw.memory_bytes > 0, "--hardware ", hw.file, ": the file gives no device memory (memory_bytes); give --budget DEVICE[,HOST]");
      b.device = (int64_t)hw.memory_bytes;
    }
    return b;
  }
  const size_t comma = text.find(',');
  b.device = parse_byte_size(text.substr(0, comma), "--budget");
  if (comma != std::string::npos) {
    GPT_CHECK(!b.one_ram, "--budget ", text, ": on a cpu hardware file the device and the host are the same RAM; give one size");
    b.host = parse_byte_size(text.substr(comma + 1), "--budget");
  }
  GPT_CHECK(b.device > 0 && (comma == std::string::npos || b.host > 0), "--budget ", text, ": sizes must be positive");
  return b;
}

}  // namespace gpt
