// The steps of the nightly cycle (cycle_step.h), one file each, and what several of them
// share: the attempt's end recorded in the store, the worker's exit, plan descriptions
// (DescribePlan: trainer/spec/plan_text.h).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "trainerd/daemon/cycle_step.h"
#include "trainerd/trainer/spec/plan_text.h"

namespace trainerd::daemon {

std::unique_ptr<CycleStep> MakeResolveStep();  // the config version, the hardware, the worker
std::unique_ptr<CycleStep> MakeDataStep();     // the night's data against the release's
std::unique_ptr<CycleStep> MakePlanStep();     // the attempt's plan, into the store and a file
std::unique_ptr<CycleStep> MakeLedgerStep();   // the plan's measured ledger; over budget: refused
std::unique_ptr<CycleStep> MakeParityStep();   // a new plan against the real large batch
std::unique_ptr<CycleStep> MakeProfileStep();  // a new plan's op profile
std::unique_ptr<CycleStep> MakeTrainStep();    // the worker under the window's deadline
std::unique_ptr<CycleStep> MakeJudgeStep();    // throughput regression and the release gate
std::unique_ptr<CycleStep> MakeReleaseStep();  // the run's end, the model, the config's state
std::unique_ptr<CycleStep> MakeReportStep();   // every run's report page

// The config version `hash` from the store, parsed, its text written where the worker reads it
// (the fallback loads a rolled-back version this way).
Result<ActiveConfig> LoadConfigVersion(CycleContext& context, const std::string& hash);

// "e1e608276217": a hash as messages show it.
std::string Short(const std::string& hash);
// printf of one or two numbers, for event messages.
std::string Format(const char* format, double a, double b = 0);
// "planner plan 8 x 4, ...": the attempt's plan with where it came from.
std::string DescribeAttemptPlan(const Attempt& attempt);

// What the policy needs of a worker that exited: how it ended, its error event's kind, and
// whether the kernel's OOM killer struck meanwhile (its cgroup counter rose since
// `ooms_before`, read when the worker started).
WorkerExit ExitOf(const ProcessExit& process, const std::optional<ErrorEvent>& error,
                  std::optional<std::int64_t> ooms_before, WorkerExit::StoppedBy stopped_by);

// The current attempt's plan has succeeded for its config version on this hardware before:
// its source is kValidated, or it equals the store's last validated plan. A store that cannot
// answer validates nothing: the plan is checked.
bool IsValidated(const CycleState& state, CycleContext& context);

// Ends the current attempt: `end` kept, the run's status and end time into the store with
// the training's metrics and evals, the run metrics updated. At most once per attempt.
void FinishAttempt(CycleState& state, CycleContext& context, AttemptEnd end);

}  // namespace trainerd::daemon
