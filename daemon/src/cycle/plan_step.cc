// The attempt's plan: the one its source gives (the last validated plan, the job's own, the
// named baseline) or the planner's (trainer-run --plan-only, --for-parity when the parity
// check is on, at the job's budget or, for a re-plan after a failure, at a smaller one).
// Stored with the run before anything runs it, so that an interrupted run names the plan it
// had, and written where the worker reads it.
#include "cycle/cycle_steps.h"
#include "trainerd/daemon/state_layout.h"
#include "trainerd/trainer/spec/units.h"
#include "trainerd/trainer/spec/worker_protocol.h"

namespace trainerd::daemon {
namespace {

class PlanStep : public CycleStep {
 public:
  const char* name() const override { return "plan"; }

  asio::awaitable<void> Run(CycleState& state, CycleContext& context) override {
    AttemptState& a = state.current;
    if (a.attempt.source == PlanSource::kPlanner ||
        a.attempt.source == PlanSource::kReplanSmaller) {
      co_await RunPlanner(state, context);
      if (a.end) co_return;
    } else {
      context.Record(a.run.id, "plan", store::Severity::kInfo, DescribeAttemptPlan(a.attempt),
                     nlohmann::json{{"source", std::string(ToString(a.attempt.source))},
                                    {"plan", ToJson(a.attempt.plan)}}
                         .dump());
    }
    a.run.plan = a.attempt.plan;
    context.RecordIfFailed(a.run.id, context.store().SetRunPlan(a.run.id, a.attempt.plan));
    a.plan_path = StateLayout(context.config().state_dir).PlanFile();
    if (Status s =
            context.files().WriteAtomically(a.plan_path, ToJson(a.attempt.plan).dump() + "\n");
        !s.ok()) {
      a.end = AttemptEnd{AttemptOutcome::kCrashed, s.message()};
    }
  }

 private:
  static asio::awaitable<void> RunPlanner(CycleState& state, CycleContext& context) {
    AttemptState& a = state.current;
    const ActiveConfig& active = *state.active;
    context.Progress("planning", a.run.id);
    std::vector<std::string> args = {"--plan-only"};
    if (context.config().parity_updates > 0) args.push_back("--for-parity");
    if (a.attempt.source == PlanSource::kReplanSmaller) {
      args.push_back("--budget");
      args.push_back(std::to_string(static_cast<std::int64_t>(
          static_cast<double>(active.spec.memory.budget_bytes) * kReplanBudgetFraction)));
    }
    const std::string log_path = StateLayout(context.config().state_dir).RunLog(a.run.id);
    const CycleContext::ReportRun out =
        co_await context.RunReportMode(active, state.window, args, log_path);
    // A planner the daemon stopped ended as the daemon made it end; any other failure is a crash.
    WorkerExit stopped;
    stopped.stopped_by = context.supervisor().stopped_by();
    const AttemptOutcome failed = stopped.stopped_by != WorkerExit::StoppedBy::kNobody
                                      ? ClassifyExit(stopped)
                                      : AttemptOutcome::kCrashed;
    if (!out.exit.ok()) {
      a.end = AttemptEnd{failed, out.exit.status().message()};
      co_return;
    }
    if (!out.ok()) {
      const std::string message =
          out.error ? out.error->message : "planner " + out.exit->Describe();
      context.Record(a.run.id, "plan_failed", store::Severity::kError, message,
                     out.error ? ToJson(WorkerEvent(*out.error)).dump() : "{}");
      const bool oom = out.exit->exited && out.exit->code == 4;
      a.end =
          oom ? AttemptEnd{AttemptOutcome::kOom, message} : AttemptEnd{failed, "planning failed"};
      co_return;
    }
    const ChosenPlan chosen = Parse<ChosenPlan>(out.report);
    a.attempt.plan = chosen.plan;
    a.plan_timing = PlanTiming{chosen.predicted_update_seconds, chosen.measured_update_seconds, 0};
    // The planner timed its plan alone; the last nights on this hardware say how training
    // compares.
    const DurationCorrection correction =
        CorrectionFrom(RecordedPlanTimings(context.store(), &state.hardware));
    const double duration = chosen.predicted_duration_seconds * correction.factor;
    const double left = state.window.deadline - context.clock().Now();
    std::string faster;  // why the fastest candidate was not taken: the trade the plan made
    if (!chosen.rejected.empty()) {
      const RejectedPlan& fastest = chosen.rejected.front();
      faster = "; " + std::to_string(chosen.rejected.size()) +
               " faster candidates rejected, the fastest " + DescribePlan(fastest.plan) + " (" +
               DescribeRejectedTiming(fastest, chosen) + "): " + fastest.reason;
    }
    context.Record(
        a.run.id, "plan", store::Severity::kInfo,
        DescribeAttemptPlan(a.attempt) + ": " + DescribeChosenTiming(chosen) +
            (correction.nights > 0
                 ? "; " + FormatDuration(duration) + " corrected " + correction.Describe()
                 : std::string()) +
            Format(", %.0f s left in the window", left) + faster,
        nlohmann::json{{"source", std::string(ToString(a.attempt.source))},
                       {"planner", out.report},
                       {"duration_correction", nlohmann::json::parse(correction.ToJson())},
                       {"corrected_duration_seconds", duration}}
            .dump());
    if (context.metrics()) context.metrics()->PlanTimed(chosen.TimeModelError());
    if (duration > left) {
      context.Record(a.run.id, "plan_exceeds_window", store::Severity::kWarning,
                     Format("predicted duration %.0f s exceeds the %.0f s left: the run will "
                            "stop at the deadline and resume from its checkpoint next night",
                            duration, left));
    }
  }
};

}  // namespace

std::unique_ptr<CycleStep> MakePlanStep() { return std::make_unique<PlanStep>(); }

}  // namespace trainerd::daemon
