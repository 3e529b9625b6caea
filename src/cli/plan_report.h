// The reports of `gpt plan` (src/plan/plan_search.h does the searching): the top K as a table with the flags
// to paste, why the next-best is slower, and how the space was pruned; or one JSON object.
#pragma once
#include <string>

#include "src/plan/plan_search.h"

namespace gpt {

std::string plan_text(const PlanRequest& rq, const PlanResult& r, const std::string& model_name);
std::string plan_json(const PlanRequest& rq, const PlanResult& r, const std::string& model_name);
// One line for `--plan auto`: the chosen flags, the prediction and how long the search took.
std::string plan_auto_line(const PlanRequest& rq, const PlanResult& r);

}  // namespace gpt
