// A run plan in JSON, the one spelling the daemon uses for the worker's --plan file, its
// `plan` events and the control socket's run records: {"microbatch", "accumulation_steps",
// "checkpoint_blocks", "precision"}.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "trainerd/store/records.h"

namespace trainerd::daemon {

nlohmann::json PlanJson(const store::RunPlan& plan);
// The plan fields of `j` (a plan file, or the planner's report, which has more keys).
// Throws nlohmann::json::exception when one is missing or has the wrong type.
store::RunPlan PlanFromJson(const nlohmann::json& j);
// "8 x 4, 1 blocks checkpointed, bf16", for event messages.
std::string DescribePlan(const store::RunPlan& plan);

}  // namespace trainerd::daemon
