// The reports of `gpt memplan --time`: one step's predicted time (table or JSON) and the --sweep over world
// sizes and strategies (src/plan/timemodel.h does the predicting).
#pragma once
#include <string>
#include <vector>

#include "src/fsdp/options.h"
#include "src/plan/hardware.h"
#include "src/plan/timemodel.h"

namespace gpt {

std::string time_table(const TimeModelInput& in, const TimePlan& p, const HardwareSpec& hw);
// The members of the "time" object (no braces), for memplan's JSON.
std::string time_json_members(const TimeModelInput& in, const TimePlan& p, const HardwareSpec& hw);

struct SweepSpec {
  std::vector<int> worlds;                    // N values
  std::vector<ShardStrategy> strategies;      // hybrid uses G = the ranks on a node
  bool weak = true;                           // weak: -B per rank fixed; strong: the global batch B*N fixed
};
// "1,2,4,8" -> {1, 2, 4, 8}; "full,grad_op" -> strategies. Throw naming the flag.
std::vector<int> parse_int_list(const std::string& s, const std::string& flag);
std::vector<ShardStrategy> parse_strategy_list(const std::string& s, const std::string& flag);
// One row per (N, strategy) that the engine accepts: step ms, tokens/s, MFU, exposed communication, the
// device peak from memplan and whether it fits the hardware's memory. JSON: one object per line.
std::string sweep_report(const TimeModelInput& base, const HardwareSpec& hw, const SweepSpec& sweep, bool json);

}  // namespace gpt
