#include <cstdio>
#include <filesystem>

#include "cycle/cycle_steps.h"
#include "trainerd/common/json_input.h"
#include "trainerd/daemon/current_release.h"
#include "trainerd/daemon/event_log.h"
#include "trainerd/daemon/host_fingerprint.h"

namespace trainerd::daemon {

CycleContext::CycleContext(const DaemonConfig& config, store::Store& store,
                           store::Store& metric_store, const Clock& clock,
                           WorkerSupervisor& supervisor, FileStore& files, DaemonMetrics* metrics,
                           std::function<void(const CycleProgress&)> on_progress)
    : config_(config),
      store_(store),
      metric_writer_(metric_store),
      clock_(clock),
      supervisor_(supervisor),
      files_(files),
      metrics_(metrics),
      on_progress_(std::move(on_progress)) {}

void CycleContext::Record(std::optional<std::int64_t> run_id, const std::string& kind,
                          store::Severity severity, const std::string& message,
                          const std::string& details_json) {
  RecordAndLog(store_, {0, clock_.Now(), run_id, kind, severity, message, details_json});
}

void CycleContext::RecordIfFailed(std::optional<std::int64_t> run_id, const Status& status) {
  if (!status.ok()) Record(run_id, "store_error", store::Severity::kError, status.message());
}

void CycleContext::Progress(const std::string& phase, std::optional<std::int64_t> run_id) {
  progress_.phase = phase;
  if (run_id) progress_.run_id = run_id;
  if (on_progress_) on_progress_(progress_);
}

WorkerSupervisor::Limits CycleContext::Limits(const Window& window) const {
  return {window.deadline - config_.schedule.deadline_grace_seconds, window.deadline};
}

std::vector<std::string> CycleContext::WorkerArgs(const ActiveConfig& active) const {
  std::vector<std::string> args = {config_.worker_path,
                                   "--config",
                                   active.worker_config_path,
                                   "--base-dir",
                                   std::filesystem::path(config_.job_path).parent_path().string(),
                                   "--json"};
  // init_from: current_release is the daemon's to resolve; the first night has none.
  if (active.spec.init_from.current_release) {
    args.insert(args.end(),
                {"--init-from", CurrentReleaseWeights(config_.state_dir).value_or("none")});
  }
  return args;
}

bool CycleContext::ReportRun::ok() const {
  return exit.ok() && exit->exited && exit->code == 0 && report.is_object();
}

std::string CycleContext::ReportRun::ErrorMessage() const {
  if (!exit.ok()) return exit.status().message();
  return error ? error->message : exit->Describe();
}

asio::awaitable<CycleContext::ReportRun> CycleContext::RunReportMode(
    const ActiveConfig& active, const Window& window, const std::vector<std::string>& mode_args,
    const std::string& log_path) {
  ReportRun out;
  std::vector<std::string> argv = WorkerArgs(active);
  argv.insert(argv.end(), mode_args.begin(), mode_args.end());
  const WorkerSupervisor::Limits limits = Limits(window);
  const LaunchSpec launch{argv, log_path};
  const std::function<void(const std::string&)> consume = [&](const std::string& line) {
    nlohmann::json j = ParseBoundedJson(line);
    if (!j.is_object()) return;
    if (!j.contains("event")) {
      out.report = std::move(j);
    } else if (Result<ParsedEvent> event = ParseWorkerEvent(line); event.ok()) {
      if (const auto* error = std::get_if<ErrorEvent>(&event->event)) out.error = *error;
    }
  };
  out.exit = co_await supervisor_.Run(launch, limits, consume);
  co_return out;
}

int CycleContext::BlocksOf(const JobSpec& spec, const std::string& config_hash) const {
  if (const int declared = NumBlocks(spec.model); declared > 0) return declared;
  const auto counted = counted_blocks_.find(config_hash);
  return counted == counted_blocks_.end() ? 0 : counted->second;
}

CycleSteps DefaultAttemptSteps() {
  CycleSteps steps;
  steps.push_back(MakeDataStep());
  steps.push_back(MakePlanStep());
  steps.push_back(MakeLedgerStep());
  steps.push_back(MakeParityStep());
  steps.push_back(MakeProfileStep());
  steps.push_back(MakeTrainStep());
  steps.push_back(MakeJudgeStep());
  steps.push_back(MakeReleaseStep());
  return steps;
}

std::string Short(const std::string& hash) { return hash.substr(0, 12); }

std::string Format(const char* format, double a, double b) {
  char buffer[128];
  std::snprintf(buffer, sizeof buffer, format, a, b);
  return buffer;
}

std::string DescribeAttemptPlan(const Attempt& attempt) {
  return std::string(ToString(attempt.source)) + " plan " + DescribePlan(attempt.plan);
}

WorkerExit ExitOf(const ProcessExit& process, const std::optional<ErrorEvent>& error,
                  std::optional<std::int64_t> ooms_before, WorkerExit::StoppedBy stopped_by) {
  const std::optional<std::int64_t> ooms_after = CgroupOomKillCount();
  WorkerExit exit;
  exit.exited = process.exited;
  exit.code = process.code;
  exit.signal = process.signal;
  if (error) exit.error_kind = error->kind;
  exit.oom_kill_rose = ooms_before && ooms_after && *ooms_after > *ooms_before;
  exit.stopped_by = stopped_by;
  return exit;
}

bool IsValidated(const CycleState& state, CycleContext& context) {
  const Attempt& attempt = state.current.attempt;
  const Result<std::optional<PlanSpec>> validated =
      context.store().LastValidatedPlan(attempt.config_hash, state.hardware, state.software);
  return IsValidatedPlan(attempt, validated.ok() ? *validated : std::nullopt);
}

void FinishAttempt(CycleState& state, CycleContext& context, AttemptEnd end) {
  AttemptState& a = state.current;
  if (a.finished) return;
  a.finished = true;
  a.end = end;
  store::RunRecord& run = a.run;
  run.status = end.regressed ? store::RunStatus::kRegressed : RunStatusFor(end.outcome);
  run.ended_at = context.clock().Now();
  WorkerReport& report = a.training.report;
  context.RecordIfFailed(run.id,
                         context.store().FinishRun(run, report.TakeMetrics(), report.evals(), {}));
  if (context.metrics()) context.metrics()->RunFinished(run, FinalSliceLosses(report.evals()));
}

}  // namespace trainerd::daemon
