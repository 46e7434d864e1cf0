#include "trainerd/daemon/nightly_cycle.h"

#include "cycle/cycle_steps.h"
#include "cycle/fallback.h"
#include "trainerd/daemon/log.h"

namespace trainerd::daemon {

NightlyCycle::NightlyCycle(const DaemonConfig& config, store::Store& store,
                           store::Store& metric_store, const Clock& clock,
                           WorkerSupervisor& supervisor, FileStore& files, DaemonMetrics* metrics,
                           std::function<void(const CycleProgress&)> on_progress,
                           CycleSteps attempt_steps)
    : context_(config, store, metric_store, clock, supervisor, files, metrics,
               std::move(on_progress)),
      resolve_(MakeResolveStep()),
      attempt_steps_(std::move(attempt_steps)),
      report_(MakeReportStep()) {}

NightlyCycle::~NightlyCycle() = default;

asio::awaitable<CycleOutcome> NightlyCycle::Run(Window window, std::string trigger,
                                                std::optional<std::int64_t> resumes_run) {
  CycleState state;
  state.window = window;
  state.trigger = trigger;
  state.resumes_run = resumes_run;
  context_.supervisor().Reset();  // an operator's cancel ends one cycle, not the next
  context_.progress() = CycleProgress{};
  context_.progress().deadline = window.deadline;
  CycleOutcome outcome;
  context_.Record(
      std::nullopt, "cycle_started", store::Severity::kInfo,
      "nightly cycle (" + trigger + "), deadline " + FormatUtc(window.deadline),
      nlohmann::json{{"trigger", trigger}, {"start", window.start}, {"deadline", window.deadline}}
          .dump());
  co_await resolve_->Run(state, context_);
  if (!state.active) {
    context_.Record(std::nullopt, "cycle_failed", store::Severity::kError, state.failure);
    outcome.summary = state.failure;
    context_.Progress("idle");
    co_return outcome;
  }
  Result<Attempt> first = FirstAttempt(state, context_);
  std::optional<Attempt> attempt;
  if (first.ok()) {
    attempt = *first;
  } else {
    outcome.summary = first.status().message();
  }
  std::vector<Attempt> tried;
  std::optional<std::int64_t> fallback_of = resumes_run;
  while (attempt) {
    co_await RunAttempt(state, *attempt, fallback_of);
    const AttemptState& done = state.current;
    outcome.run_ids = state.run_ids;
    if (!done.end) break;  // the store refused the run record
    outcome.released = done.released;
    outcome.summary = "run " + std::to_string(done.run.id) + " " +
                      std::string(store::ToString(done.run.status)) + ": " + done.end->message;
    tried.push_back(done.attempt);
    if (done.end->outcome == AttemptOutcome::kSucceeded) {
      outcome.succeeded = done.run.status == store::RunStatus::kSucceeded;
      break;
    }
    // Deadline, interrupted, cancelled: the daemon caused them and no other plan would help.
    if (!CallsForFallback(done.end->outcome)) break;
    fallback_of = done.run.id;
    attempt = NextAttempt(state, context_, tried);
  }
  co_await report_->Run(state, context_);
  context_.Record(std::nullopt, outcome.succeeded ? "cycle_succeeded" : "cycle_failed",
                  outcome.succeeded ? store::Severity::kInfo : store::Severity::kError,
                  outcome.summary);
  context_.Progress("idle");
  co_return outcome;
}

asio::awaitable<void> NightlyCycle::RunAttempt(CycleState& state, const Attempt& attempt,
                                               std::optional<std::int64_t> fallback_of) {
  state.current = AttemptState{};
  state.current.attempt = attempt;
  if (!BeginRun(state, fallback_of)) co_return;
  for (const std::unique_ptr<CycleStep>& step : attempt_steps_) {
    co_await step->Run(state, context_);
    const std::optional<AttemptEnd>& end = state.current.end;
    if (end && end->outcome != AttemptOutcome::kSucceeded) break;
  }
  if (!state.current.end) {
    state.current.end = AttemptEnd{AttemptOutcome::kCrashed, "no step ended the attempt"};
  }
  FinishAttempt(state, context_, *state.current.end);
}

bool NightlyCycle::BeginRun(CycleState& state, std::optional<std::int64_t> fallback_of) {
  const ActiveConfig& active = *state.active;
  store::RunRecord& run = state.current.run;
  const Attempt& attempt = state.current.attempt;
  const double now = context_.clock().Now();
  run.config_hash = active.version.hash;
  run.fallback_of = fallback_of;
  run.created_at = now;
  run.deadline_at = state.window.deadline;
  run.hardware = state.hardware;
  run.software = state.software;
  run.world_size = active.spec.distributed.ranks;
  Result<std::int64_t> id = context_.store().CreateRun(run);
  if (!id.ok()) {
    context_.Record(std::nullopt, "store_error", store::Severity::kError,
                    "cannot record the run: " + id.status().message());
    return false;
  }
  run.id = *id;
  state.run_ids.push_back(run.id);
  context_.RecordIfFailed(run.id, context_.store().MarkRunStarted(run.id, now));
  run.started_at = now;
  run.status = store::RunStatus::kRunning;
  if (context_.metrics()) context_.metrics()->RunStarted();
  context_.Record(run.id, "run_started", store::Severity::kInfo,
                  "config " + Short(run.config_hash) + ", plan source " +
                      std::string(ToString(attempt.source)) +
                      (fallback_of ? ", replacing run " + std::to_string(*fallback_of) : ""),
                  nlohmann::json{{"config_hash", run.config_hash},
                                 {"plan_source", std::string(ToString(attempt.source))},
                                 {"fallback_of", fallback_of ? nlohmann::json(*fallback_of)
                                                             : nlohmann::json(nullptr)}}
                      .dump());
  return true;
}

}  // namespace trainerd::daemon
