// The parity check of a plan not yet validated for its config version on this hardware
// (trainer-run --parity): a plan that trains another job than the real large batch is refused
// before training; the check's own OOM, crash or stop ends the attempt as such.
#include <algorithm>

#include "cycle/cycle_steps.h"
#include "trainerd/daemon/host_fingerprint.h"
#include "trainerd/daemon/state_layout.h"
#include "trainerd/trainer/spec/worker_protocol.h"

namespace trainerd::daemon {
namespace {

// " (3 updates, 1 skipped by the fp16 loss scaler, at the reduced effective batch 4, 2.1 s)":
// what the check ran. Its updates are the configured count, more when it replayed the plan's
// fp16 skips; the batch is named when the check was reduced to fit the memory.
std::string DescribeCheckRun(const ParityReport& report, int configured, double seconds) {
  std::size_t ran = static_cast<std::size_t>(configured), skipped = 0;
  if (!report.comparisons.empty()) {
    const std::vector<ParityUpdate>& updates = report.comparisons.back().updates;
    ran = updates.size();
    skipped = static_cast<std::size_t>(std::count_if(
        updates.begin(), updates.end(), [](const ParityUpdate& u) { return u.skipped; }));
  }
  std::string text = " (" + std::to_string(ran) + " updates";
  if (skipped > 0) text += ", " + std::to_string(skipped) + " skipped by the fp16 loss scaler";
  if (!report.reduction.empty()) {
    text += ", at the reduced effective batch " + std::to_string(report.checked_effective_batch);
  }
  return text + Format(", %.1f s)", seconds);
}

// The parity event's message: what the check of `plan` found.
std::string DescribeParity(AttemptOutcome outcome, const std::string& plan, int updates,
                           double seconds, const ProcessExit& exit, const ParityReport& report,
                           const std::optional<ErrorEvent>& error) {
  const std::string took = DescribeCheckRun(report, updates, seconds);
  switch (outcome) {
    case AttemptOutcome::kSucceeded:
      return plan + " matches the reference" + took;
    case AttemptOutcome::kRejected:
      return plan + " failed the parity check" + took + ": refused before training" +
             (report.failures.empty() ? "" : "; " + report.failures.front());
    case AttemptOutcome::kDeadline:
    case AttemptOutcome::kInterrupted:
    case AttemptOutcome::kCancelled:
      return "parity check stopped (" + std::string(ToString(outcome)) + "), worker " +
             exit.Describe();
    default:
      return std::string(outcome == AttemptOutcome::kOom ? "parity check ran out of memory"
                                                         : "parity check failed") +
             ", worker " + exit.Describe() + (error ? ": " + error->message : "");
  }
}

class ParityStep : public CycleStep {
 public:
  const char* name() const override { return "parity"; }

  asio::awaitable<void> Run(CycleState& state, CycleContext& context) override {
    AttemptState& a = state.current;
    if (IsValidated(state, context)) co_return;  // it passed when it first trained
    const std::string plan = DescribeAttemptPlan(a.attempt);
    const int updates = context.config().parity_updates;
    if (updates == 0) {
      context.Record(
          a.run.id, "parity_disabled", store::Severity::kInfo,
          "the parity check is disabled (parity.updates: 0): " + plan + " trains unchecked",
          nlohmann::json{{"plan", ToJson(a.attempt.plan)}}.dump());
      co_return;
    }
    context.Progress("checking parity", a.run.id);
    const std::vector<std::string> args = {"--plan", a.plan_path, "--parity", "--parity-updates",
                                           std::to_string(updates)};
    const std::string log_path = StateLayout(context.config().state_dir).RunLog(a.run.id);
    const std::optional<std::int64_t> ooms_before = CgroupOomKillCount();
    const double started = context.clock().Now();
    const CycleContext::ReportRun out =
        co_await context.RunReportMode(*state.active, state.window, args, log_path);
    if (!out.exit.ok()) {
      const std::string message = "parity check: " + out.exit.status().message();
      context.Record(a.run.id, "parity", store::Severity::kError, message);
      a.end = AttemptEnd{AttemptOutcome::kCrashed, message};
      co_return;
    }
    const double seconds = std::max(0.0, context.clock().Now() - started);
    a.run.parity_seconds = seconds;
    const ParityReport report = Parse<ParityReport>(out.report);
    const WorkerExit exit =
        ExitOf(*out.exit, out.error, ooms_before, context.supervisor().stopped_by());
    const bool passed = out.report.is_object() && out.report.contains("pass") && report.pass;
    const AttemptOutcome outcome = ClassifyParityCheck(exit, passed);
    const std::string message =
        DescribeParity(outcome, plan, updates, seconds, *out.exit, report, out.error);
    nlohmann::json details = out.report.is_object() ? out.report : nlohmann::json::object();
    details["wall_seconds"] = seconds;
    if (out.error) details["error"] = ToJson(WorkerEvent(*out.error));
    context.Record(a.run.id, "parity",
                   outcome == AttemptOutcome::kSucceeded ? store::Severity::kInfo
                   : CallsForFallback(outcome)           ? store::Severity::kError
                                                         : store::Severity::kWarning,
                   message, details.dump());
    if (outcome != AttemptOutcome::kSucceeded) a.end = AttemptEnd{outcome, message};
  }
};

}  // namespace

std::unique_ptr<CycleStep> MakeParityStep() { return std::make_unique<ParityStep>(); }

}  // namespace trainerd::daemon
