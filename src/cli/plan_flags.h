// The flags `gpt plan` and `--plan auto` share: the pins (search dimensions fixed by explicit flags) and
// --budget DEVICE[,HOST] with its defaults.
#pragma once
#include <string>

#include "src/cli/flags.h"
#include "src/plan/hardware.h"
#include "src/plan/plan_search.h"

namespace gpt {

// Each of --tp --sequence-parallel --shard --shard-group --recompute --offload --wrap --gather-slots -B
// --reduce-dtype --no-sync that is given fixes its dimension; the others are searched.
PlanPins parse_plan_pins(Flags& f);

// --budget "80GiB" or "80GiB,512GiB" (device, host; per rank). On a cpu hardware file device and host are one
// RAM: one size, held against their sum. Defaults: a gpu file's memory_bytes for the device and no host
// limit; on a cpu file this machine's available memory divided among ranks_per_node ranks.
PlanBudget parse_plan_budget(const std::string& text, const HardwareSpec& hw, int ranks_per_node);

}  // namespace gpt
