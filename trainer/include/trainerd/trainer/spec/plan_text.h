// A plan and the planner's choice as a person reads them: trainer-run --plan-only prints
// PlanText, the daemon's plan event and the run report use the same sentences. Durations
// are compared like with like: the chosen plan's job time is its measured update times the
// job's updates; a rejected plan that was never timed is compared by the time model with the
// time model's figure for the chosen plan, and one that was timed by its measured update.
// Torch-free.
#pragma once

#include <string>

#include "trainerd/trainer/spec/worker_protocol.h"

namespace trainerd {

// "16 x 2, 1 block checkpointed, bf16": microbatch x accumulation steps.
std::string DescribePlan(const PlanSpec& plan);

// The plan's levers and the ledger category each attacks: "4 microbatches (activations), 1
// block checkpointed (activations), optimizer state on the host (optimizer state)"; "none"
// for the job as written.
std::string DescribeLevers(const PlanSpec& plan);

// "106 s at its measured 0.353 s per update; the time model predicted 167 s (+58%)".
std::string DescribeChosenTiming(const ChosenPlan& chosen);

// What the device's memory counted on the CPU: the host as the device (the host levers not
// tried), or a simulated accelerator whose budget host memory is outside; "" on a GPU.
std::string DescribeMemoryCounting(const ChosenPlan& chosen);

// Why `rejected` looked faster than `chosen`, in the same measure for both: "measured 0.291 s
// per update against 0.353 s" or "time model 145 s against 167 s for the chosen plan".
std::string DescribeRejectedTiming(const RejectedPlan& rejected, const ChosenPlan& chosen);

// The choice on a terminal: the plan, its peak and time, the rejected alternatives.
std::string PlanText(const ChosenPlan& chosen);

}  // namespace trainerd
