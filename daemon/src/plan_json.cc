#include "trainerd/daemon/plan_json.h"

namespace trainerd::daemon {

nlohmann::json PlanJson(const store::RunPlan& plan) {
  return {{"microbatch", plan.microbatch},
          {"accumulation_steps", plan.accumulation_steps},
          {"checkpoint_blocks", plan.checkpoint_blocks},
          {"precision", plan.precision}};
}

store::RunPlan PlanFromJson(const nlohmann::json& j) {
  store::RunPlan plan;
  plan.microbatch = j.at("microbatch").get<std::int64_t>();
  plan.accumulation_steps = j.at("accumulation_steps").get<std::int64_t>();
  plan.checkpoint_blocks = j.at("checkpoint_blocks").get<std::vector<std::int64_t>>();
  plan.precision = j.at("precision").get<std::string>();
  return plan;
}

std::string DescribePlan(const store::RunPlan& plan) {
  return std::to_string(plan.microbatch) + " x " + std::to_string(plan.accumulation_steps) + ", " +
         std::to_string(plan.checkpoint_blocks.size()) + " blocks checkpointed, " + plan.precision;
}

}  // namespace trainerd::daemon
