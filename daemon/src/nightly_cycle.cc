#include "trainerd/daemon/nightly_cycle.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "trainerd/common/sha256.h"
#include "trainerd/daemon/current_release.h"
#include "trainerd/daemon/event_log.h"
#include "trainerd/daemon/host_fingerprint.h"
#include "trainerd/daemon/log.h"
#include "trainerd/daemon/plan_json.h"
#include "trainerd/daemon/rank_launch.h"
#include "trainerd/daemon/run_report.h"
#include "trainerd/daemon/state_layout.h"
#include "trainerd/daemon/worker_report.h"
#include "trainerd/trainer/spec/job_spec_parser.h"

namespace trainerd::daemon {

namespace {

// Metrics are stored in batches of this many updates while a run trains.
constexpr std::size_t kMetricBatch = 20;

// Updates the op profile of a new plan measures (after one warm-up): a few seconds of a
// small job, a fraction of a large one's first update.
constexpr int kProfileUpdates = 3;

std::string Short(const std::string& hash) { return hash.substr(0, 12); }

std::string Format(const char* format, double a, double b = 0) {
  char buffer[128];
  std::snprintf(buffer, sizeof buffer, format, a, b);
  return buffer;
}

store::RunPlan PlanOfSpec(const PlanSpec& spec) { return PlanFromJson(trainerd::ToJson(spec)); }

// What the policy needs of a worker that exited: how it ended, its error event's kind, and
// whether the kernel's OOM killer struck meanwhile (its cgroup counter rose since
// `ooms_before`, read when the worker started).
WorkerExit ExitOf(const ProcessExit& process, const nlohmann::json& error,
                  std::optional<std::int64_t> ooms_before, WorkerExit::StoppedBy stopped_by) {
  const std::optional<std::int64_t> ooms_after = CgroupOomKillCount();
  WorkerExit exit;
  exit.exited = process.exited;
  exit.code = process.code;
  exit.signal = process.signal;
  if (error.is_object()) exit.error_kind = error.value("kind", "");
  exit.oom_kill_rose = ooms_before && ooms_after && *ooms_after > *ooms_before;
  exit.stopped_by = stopped_by;
  return exit;
}

// A parity report (trainer-run --parity --json) whose verdict is a pass.
bool ReportPassed(const nlohmann::json& report) {
  const auto pass = report.find("pass");  // end() unless an object with a `pass`
  return pass != report.end() && pass->is_boolean() && pass->get<bool>();
}

// The parity event's message: what the check of `plan` found.
std::string DescribeParity(AttemptOutcome outcome, const std::string& plan, int updates,
                           double seconds, const ProcessExit& exit, const nlohmann::json& report,
                           const nlohmann::json& error) {
  const std::string took =
      " (" + std::to_string(updates) + " updates" + Format(", %.1f s)", seconds);
  switch (outcome) {
    case AttemptOutcome::kSucceeded:
      return plan + " matches the reference" + took;
    case AttemptOutcome::kRejected: {
      const auto failures = report.find("failures");  // one sentence per failed check
      const bool named = failures != report.end() && failures->is_array() && !failures->empty() &&
                         failures->front().is_string();
      return plan + " failed the parity check" + took + ": refused before training" +
             (named ? "; " + failures->front().get<std::string>() : "");
    }
    case AttemptOutcome::kDeadline:
    case AttemptOutcome::kInterrupted:
    case AttemptOutcome::kCancelled:
      return "parity check stopped (" + std::string(ToString(outcome)) + "), worker " +
             exit.Describe();
    default:
      return std::string(outcome == AttemptOutcome::kOom ? "parity check ran out of memory"
                                                         : "parity check failed") +
             ", worker " + exit.Describe() +
             (error.is_object() ? ": " + error.value("message", "") : "");
  }
}

}  // namespace

struct NightlyCycle::WorkerReportOutput {
  Result<ProcessExit> exit = Status::Internal("not run");
  nlohmann::json report;  // the one JSON object the mode prints
  nlohmann::json error;   // its error event, if any
};

asio::awaitable<NightlyCycle::WorkerReportOutput> NightlyCycle::RunReportMode(
    const ActiveConfig& active, const std::vector<std::string>& extra_args,
    const std::string& log_path) {
  WorkerReportOutput out;
  std::vector<std::string> argv = WorkerArgs(active);
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  const WorkerSupervisor::Limits limits = Limits();
  const LaunchSpec launch{argv, log_path};
  const std::function<void(const std::string&)> consume = [&](const std::string& line) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) return;
    if (j.value("event", "") == "error") {
      out.error = j;
    } else if (!j.contains("event")) {
      out.report = j;
    }
  };
  out.exit = co_await supervisor_.Run(launch, limits, consume);
  co_return out;
}

asio::awaitable<store::HardwareFingerprint> NightlyCycle::DescribeHardware(
    const ActiveConfig& active) {
  store::HardwareFingerprint hardware = HostHardware(active.spec.runtime.device);
  if (hardware.device == "cpu") co_return hardware;  // the host's own memory, read by the daemon
  const std::vector<std::string> args = {"--device-info"};
  const std::string log_path = StateLayout(config_.state_dir).DeviceInfoLog();
  const WorkerReportOutput out = co_await RunReportMode(active, args, log_path);
  const bool described = out.exit.ok() && out.exit->exited && out.exit->code == 0 &&
                         ApplyDeviceDescription(out.report, &hardware);
  if (!described) {
    Record(std::nullopt, "device_unknown", store::Severity::kWarning,
           "the worker could not describe device " + hardware.device + " (" + log_path +
               "): runs are recorded against \"" + hardware.device + "\" with unknown memory",
           out.error.is_object() ? out.error.dump() : "{}");
  }
  co_return hardware;
}

struct NightlyCycle::AttemptResult {
  std::int64_t run_id = 0;
  AttemptOutcome outcome = AttemptOutcome::kCrashed;
  store::RunStatus status = store::RunStatus::kCrashed;
  bool released = false;
  std::string message;
};

NightlyCycle::NightlyCycle(const DaemonConfig& config, store::Store& store,
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

void NightlyCycle::Record(std::optional<std::int64_t> run_id, const std::string& kind,
                          store::Severity severity, const std::string& message,
                          const std::string& details_json) {
  RecordAndLog(store_, {0, clock_.Now(), run_id, kind, severity, message, details_json});
}

void NightlyCycle::WriteReports(const std::vector<std::int64_t>& run_ids) {
  const StateLayout layout(config_.state_dir);
  for (const std::int64_t id : run_ids) {
    const std::string path = layout.RunReport(id);
    if (Status s = WriteRunReport(store_, id, clock_.Now(), path); !s.ok()) {
      Record(id, "report_failed", store::Severity::kWarning,
             "the run report could not be written: " + s.message());
    } else {
      Log(LogPriority::kInfo, "report: " + path, {id, ""});
    }
  }
}

void NightlyCycle::Progress(const std::string& phase, std::optional<std::int64_t> run_id) {
  progress_.phase = phase;
  if (run_id) progress_.run_id = run_id;
  if (on_progress_) on_progress_(progress_);
}

WorkerSupervisor::Limits NightlyCycle::Limits() const {
  return {window_.deadline - config_.schedule.deadline_grace_seconds, window_.deadline};
}

int NightlyCycle::BlocksOf(const JobSpec& spec, const std::string& config_hash) const {
  if (const int declared = NumBlocks(spec.model); declared > 0) return declared;
  const auto counted = counted_blocks_.find(config_hash);
  return counted == counted_blocks_.end() ? 0 : counted->second;
}

std::vector<std::string> NightlyCycle::WorkerArgs(const ActiveConfig& active) const {
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

Result<ActiveConfig> NightlyCycle::LoadVersion(const std::string& hash) {
  Result<store::ConfigVersion> version = store_.GetConfigVersion(hash);
  if (!version.ok()) return version.status();
  Result<JobSpec> spec = ParseJobSpecText(version->yaml, config_.job_path);
  if (!spec.ok()) return spec.status();
  const StateLayout layout(config_.state_dir);
  const std::string path = layout.ConfigCopy(hash);
  if (Status s = files_.WriteAtomically(path, version->yaml); !s.ok()) return s;
  if (metrics_) metrics_->Budget(spec->memory.budget_bytes, spec->memory.usable_bytes());
  return ActiveConfig{*version, *spec, path};
}

Result<ActiveConfig> NightlyCycle::ResolveConfig() {
  const double now = clock_.Now();
  std::string reason;
  std::string failed_hash;
  Result<std::string> text = files_.Read(config_.job_path);
  if (!text.ok()) {
    reason = text.status().message() + " (the job spec)";
    Record(std::nullopt, "config_unreadable", store::Severity::kError, reason);
  } else {
    store::ConfigVersion seen{Sha256Hex(*text), *text, now, store::ConfigState::kCandidate};
    Result<store::ConfigVersion> version = store_.RecordConfigVersion(seen);
    if (!version.ok()) return version.status();
    failed_hash = version->hash;
    if (version->first_seen == now) {
      Record(std::nullopt, "config_candidate", store::Severity::kInfo,
             "new config version " + Short(version->hash) + " of " + config_.job_path,
             nlohmann::json{{"config_hash", version->hash}}.dump());
    }
    Result<JobSpec> spec = ParseJobSpecText(version->yaml, config_.job_path);
    if (!spec.ok()) {
      reason = "invalid job spec: " + spec.status().message();
      if (version->state != store::ConfigState::kBad) {
        (void)store_.SetConfigState({version->hash, store::ConfigState::kBad, reason, now});
      }
      Record(std::nullopt, "config_invalid", store::Severity::kError, reason,
             nlohmann::json{{"config_hash", version->hash}}.dump());
    } else if (version->state == store::ConfigState::kBad) {
      reason = "config version " + Short(version->hash) + " is marked bad";
      Record(std::nullopt, "config_bad_skipped", store::Severity::kWarning, reason,
             nlohmann::json{{"config_hash", version->hash}}.dump());
    } else {
      return LoadVersion(version->hash);
    }
  }
  Result<std::optional<store::ConfigVersion>> known_good = store_.LastKnownGoodConfig();
  if (!known_good.ok()) return known_good.status();
  if (!*known_good) {
    return Status::FailedPrecondition(reason + "; no known-good config version to fall back to");
  }
  if (metrics_) metrics_->Rollback("invalid_config");
  Record(std::nullopt, "rollback", store::Severity::kWarning,
         reason + "; running the last known-good version " + Short((*known_good)->hash),
         nlohmann::json{{"from", failed_hash},
                        {"to", (*known_good)->hash},
                        {"reason", failed_hash.empty() ? "unreadable_config" : "invalid_config"}}
             .dump());
  return LoadVersion((*known_good)->hash);
}

asio::awaitable<CycleOutcome> NightlyCycle::Run(Window window, std::string trigger,
                                                std::optional<std::int64_t> resumes_run) {
  window_ = window;
  supervisor_.Reset();  // an operator's cancel ends one cycle, not the next
  progress_ = CycleProgress{};
  progress_.deadline = window.deadline;
  CycleOutcome outcome;
  Progress("resolving config");
  Record(
      std::nullopt, "cycle_started", store::Severity::kInfo,
      "nightly cycle (" + trigger + "), deadline " + FormatUtc(window.deadline),
      nlohmann::json{{"trigger", trigger}, {"start", window.start}, {"deadline", window.deadline}}
          .dump());
  Result<ActiveConfig> active = ResolveConfig();
  if (!active.ok()) {
    Record(std::nullopt, "cycle_failed", store::Severity::kError, active.status().message());
    outcome.summary = active.status().message();
    Progress("idle");
    co_return outcome;
  }
  hardware_ = co_await DescribeHardware(*active);

  auto first_attempt = [&](const ActiveConfig& config) -> Result<Attempt> {
    Result<std::optional<store::RunPlan>> validated =
        store_.LastValidatedPlan(config.version.hash, hardware_);
    if (!validated.ok()) return validated.status();
    Attempt a{
        config.version.hash, FirstPlanSource(validated->has_value(), config.spec.plan_given), {}};
    if (a.source == PlanSource::kValidated) a.plan = **validated;
    if (a.source == PlanSource::kConfig) a.plan = PlanOfSpec(config.spec.plan);
    return a;
  };
  Result<Attempt> attempt = first_attempt(*active);
  std::vector<Attempt> tried;
  std::optional<std::int64_t> fallback_of = resumes_run;
  while (attempt.ok()) {
    AttemptResult result = co_await RunAttempt(*active, *attempt, fallback_of);
    outcome.run_ids.push_back(result.run_id);
    outcome.released = result.released;
    outcome.summary = "run " + std::to_string(result.run_id) + " " +
                      std::string(store::ToString(result.status)) + ": " + result.message;
    tried.push_back(*attempt);
    const AttemptOutcome o = result.outcome;
    if (o == AttemptOutcome::kSucceeded) {
      outcome.succeeded = result.status == store::RunStatus::kSucceeded;
      break;
    }
    if (!CallsForFallback(o)) break;  // deadline, interrupted, cancelled: nothing to retry
    Result<std::optional<store::ConfigVersion>> known_good = store_.LastKnownGoodConfig();
    Result<std::optional<store::RunPlan>> validated =
        store_.LastValidatedPlan(active->version.hash, hardware_);
    Result<store::ConfigVersion> current = store_.GetConfigVersion(active->version.hash);
    if (!known_good.ok() || !validated.ok() || !current.ok()) break;
    FallbackInput input;
    input.outcome = o;
    input.tried = tried;
    input.config_state = current->state;
    if (*known_good) input.known_good_hash = (*known_good)->hash;
    input.validated_plan = *validated;
    input.baseline_plan = NamedBaselinePlan(active->spec.training.effective_batch,
                                            BlocksOf(active->spec, active->version.hash));
    input.max_attempts = config_.max_attempts;
    input.seconds_left = Limits().sigterm_at - clock_.Now();
    const FallbackDecision decision = DecideFallback(input);
    const nlohmann::json details = {{"failed_run", result.run_id},
                                    {"reason", std::string(ToString(o))},
                                    {"retry", decision.retry},
                                    {"config_hash", decision.config_hash},
                                    {"plan_source", std::string(ToString(decision.source))},
                                    {"rolled_back", decision.rolled_back},
                                    {"mark_config_bad", decision.mark_config_bad}};
    if (decision.mark_config_bad) {
      (void)store_.SetConfigState({active->version.hash, store::ConfigState::kBad, decision.reason,
                                   clock_.Now(), result.run_id});
    }
    if (metrics_ && decision.retry) metrics_->Fallback(ToString(o));
    if (metrics_ && decision.rolled_back) metrics_->Rollback(ToString(o));
    if (decision.rolled_back) {
      Record(result.run_id, "rollback", store::Severity::kWarning, decision.reason,
             nlohmann::json{{"from", active->version.hash},
                            {"to", decision.config_hash},
                            {"reason", std::string(ToString(o))}}
                 .dump());
    }
    Record(result.run_id, decision.retry ? "fallback" : "fallback_exhausted",
           decision.retry ? store::Severity::kWarning : store::Severity::kError, decision.reason,
           details.dump());
    if (!decision.retry || supervisor_.stopped_by() != WorkerExit::StoppedBy::kNobody) break;
    if (decision.rolled_back) {
      active = LoadVersion(decision.config_hash);
      if (!active.ok()) {
        Record(result.run_id, "cycle_failed", store::Severity::kError, active.status().message());
        break;
      }
      attempt = first_attempt(*active);
    } else {
      attempt =
          Attempt{decision.config_hash, decision.source, decision.plan.value_or(store::RunPlan{})};
    }
    fallback_of = result.run_id;
  }
  if (!attempt.ok()) outcome.summary = attempt.status().message();
  WriteReports(outcome.run_ids);
  Record(std::nullopt, outcome.succeeded ? "cycle_succeeded" : "cycle_failed",
         outcome.succeeded ? store::Severity::kInfo : store::Severity::kError, outcome.summary);
  Progress("idle");
  co_return outcome;
}

asio::awaitable<Result<std::optional<store::RunPlan>>> NightlyCycle::Plan(
    const ActiveConfig& active, Attempt& attempt, std::int64_t run_id) {
  if (attempt.source != PlanSource::kPlanner && attempt.source != PlanSource::kReplanSmaller) {
    Record(run_id, "plan", store::Severity::kInfo,
           std::string(ToString(attempt.source)) + " plan " + DescribePlan(attempt.plan),
           nlohmann::json{{"source", std::string(ToString(attempt.source))},
                          {"plan", PlanJson(attempt.plan)}}
               .dump());
    co_return std::optional<store::RunPlan>(attempt.plan);
  }
  Progress("planning", run_id);
  std::vector<std::string> args = {"--plan-only"};
  if (attempt.source == PlanSource::kReplanSmaller) {
    args.push_back("--budget");
    args.push_back(std::to_string(static_cast<std::int64_t>(
        static_cast<double>(active.spec.memory.budget_bytes) * kReplanBudgetFraction)));
  }
  const std::string log_path = StateLayout(config_.state_dir).RunLog(run_id);
  const WorkerReportOutput lines = co_await RunReportMode(active, args, log_path);
  const Result<ProcessExit>& exit = lines.exit;
  if (!exit.ok()) co_return exit.status();
  if (!exit->exited || exit->code != 0 || !lines.report.is_object()) {
    const std::string message =
        lines.error.is_object() ? lines.error.value("message", "") : "planner " + exit->Describe();
    Record(run_id, "plan_failed", store::Severity::kError, message,
           lines.error.is_object() ? lines.error.dump() : "{}");
    if (exit->exited && exit->code == 4) co_return Status::OutOfMemory(message);
    co_return std::optional<store::RunPlan>();
  }
  attempt.plan = PlanFromJson(lines.report);
  const double predicted = lines.report.value("predicted_duration_seconds", 0.0);
  const double left = window_.deadline - clock_.Now();
  const nlohmann::json rejected = lines.report.value("rejected", nlohmann::json::array());
  std::string faster;  // why the fastest candidate was not taken: the trade the plan made
  try {
    if (!rejected.empty()) {
      faster = "; " + std::to_string(rejected.size()) +
               " faster candidates rejected, the fastest " +
               DescribePlan(PlanFromJson(rejected[0])) + ": " +
               rejected[0].value("reason", std::string());
    }
  } catch (const nlohmann::json::exception&) {
    faster.clear();  // a malformed candidate only costs the message its explanation
  }
  Record(
      run_id, "plan", store::Severity::kInfo,
      std::string(ToString(attempt.source)) + " plan " + DescribePlan(attempt.plan) +
          Format(": predicted %.0f s, %.0f s left in the window", predicted, left) + faster,
      nlohmann::json{{"source", std::string(ToString(attempt.source))}, {"planner", lines.report}}
          .dump());
  if (predicted > left) {
    Record(run_id, "plan_exceeds_window", store::Severity::kWarning,
           Format("predicted duration %.0f s exceeds the %.0f s left: the run will stop at the "
                  "deadline and resume from its checkpoint next night",
                  predicted, left));
  }
  co_return std::optional<store::RunPlan>(attempt.plan);
}

struct NightlyCycle::Ledger {
  std::optional<store::MemoryByCategory> memory;  // empty when it could not be measured
  std::int64_t usable_bytes = 0;                  // what the peak is measured against
};

asio::awaitable<NightlyCycle::Ledger> NightlyCycle::MeasureLedger(const ActiveConfig& active,
                                                                  const std::string& plan_path,
                                                                  std::int64_t run_id) {
  Progress("measuring ledger", run_id);
  const std::vector<std::string> args = {"--plan", plan_path, "--ledger"};
  const std::string log_path = StateLayout(config_.state_dir).RunLog(run_id);
  const WorkerReportOutput lines = co_await RunReportMode(active, args, log_path);
  const Result<ProcessExit>& exit = lines.exit;
  if (!exit.ok() || !exit->exited || exit->code != 0 || !lines.report.is_object()) {
    Record(run_id, "ledger_failed", store::Severity::kWarning,
           "the memory ledger could not be measured (" +
               (exit.ok() ? exit->Describe() : exit.status().message()) +
               "); the run record keeps only the measured peak");
    co_return Ledger{};
  }
  const nlohmann::json& l = lines.report;
  store::MemoryByCategory m;
  m.parameters = l.value("parameters_bytes", std::int64_t{0});
  m.gradients = l.value("gradients_bytes", std::int64_t{0});
  m.optimizer_state = l.value("optimizer_state_bytes", std::int64_t{0});
  m.activations = l.value("activations_bytes", std::int64_t{0});
  m.temporaries = l.value("temporaries_bytes", std::int64_t{0});
  m.inputs = l.value("inputs_bytes", std::int64_t{0});
  m.peak = l.value("peak_bytes", std::int64_t{0});
  const std::int64_t usable = l.value("usable_bytes", std::int64_t{0});
  if (const auto blocks = l.find("blocks"); blocks != l.end() && blocks->is_array()) {
    counted_blocks_[active.version.hash] = static_cast<int>(blocks->size());
  }
  Record(run_id, "ledger", m.peak > usable ? store::Severity::kWarning : store::Severity::kInfo,
         Format("ledger peak %.1f MiB against %.1f MiB usable", m.peak / 1048576.0,
                usable / 1048576.0),
         l.dump());
  co_return Ledger{m, usable};
}

struct NightlyCycle::Refusal {
  AttemptOutcome outcome = AttemptOutcome::kRejected;
  std::string message;  // the run's one line
};

asio::awaitable<std::optional<NightlyCycle::Refusal>> NightlyCycle::CheckPlanBeforeTraining(
    const ActiveConfig& active, const Attempt& attempt, const std::string& plan_path,
    const Ledger& ledger, store::RunRecord& run) {
  std::optional<Refusal> refusal = RefuseOverBudget(attempt, ledger, run.id);
  if (!refusal) refusal = co_await CheckParity(active, attempt, plan_path, run);
  co_return refusal;
}

std::optional<NightlyCycle::Refusal> NightlyCycle::RefuseOverBudget(const Attempt& attempt,
                                                                    const Ledger& ledger,
                                                                    std::int64_t run_id) {
  // An unmeasured ledger (ledger_failed) proves nothing: the plan trains under the budget.
  if (!ledger.memory || ledger.usable_bytes <= 0 || ledger.memory->peak <= ledger.usable_bytes) {
    return std::nullopt;
  }
  const std::string message =
      std::string(ToString(attempt.source)) + " plan " + DescribePlan(attempt.plan) +
      Format(" refused before training: its ledger peak %.1f MiB exceeds the %.1f MiB usable",
             ledger.memory->peak / 1048576.0, ledger.usable_bytes / 1048576.0);
  Record(run_id, "plan_over_budget", store::Severity::kWarning, message,
         nlohmann::json{{"peak_bytes", ledger.memory->peak},
                        {"usable_bytes", ledger.usable_bytes},
                        {"source", std::string(ToString(attempt.source))},
                        {"plan", PlanJson(attempt.plan)}}
             .dump());
  return Refusal{AttemptOutcome::kRejected, message};
}

bool NightlyCycle::IsValidated(const Attempt& attempt) {
  // A store that cannot answer validates nothing: the plan is checked.
  const Result<std::optional<store::RunPlan>> validated =
      store_.LastValidatedPlan(attempt.config_hash, hardware_);
  return IsValidatedPlan(attempt, validated.ok() ? *validated : std::nullopt);
}

asio::awaitable<std::optional<NightlyCycle::Refusal>> NightlyCycle::CheckParity(
    const ActiveConfig& active, const Attempt& attempt, const std::string& plan_path,
    store::RunRecord& run) {
  if (IsValidated(attempt)) co_return std::nullopt;  // it passed when it first trained
  const std::string plan =
      std::string(ToString(attempt.source)) + " plan " + DescribePlan(attempt.plan);
  if (config_.parity_updates == 0) {
    Record(run.id, "parity_disabled", store::Severity::kInfo,
           "the parity check is disabled (parity.updates: 0): " + plan + " trains unchecked",
           nlohmann::json{{"plan", PlanJson(attempt.plan)}}.dump());
    co_return std::nullopt;
  }
  Progress("checking parity", run.id);
  const std::vector<std::string> args = {"--plan", plan_path, "--parity", "--parity-updates",
                                         std::to_string(config_.parity_updates)};
  const std::string log_path = StateLayout(config_.state_dir).RunLog(run.id);
  const std::optional<std::int64_t> ooms_before = CgroupOomKillCount();
  const double started = clock_.Now();
  const WorkerReportOutput out = co_await RunReportMode(active, args, log_path);
  if (!out.exit.ok()) {
    const std::string message = "parity check: " + out.exit.status().message();
    Record(run.id, "parity", store::Severity::kError, message);
    co_return Refusal{AttemptOutcome::kCrashed, message};
  }
  run.parity_seconds = std::max(0.0, clock_.Now() - started);
  const WorkerExit exit = ExitOf(*out.exit, out.error, ooms_before, supervisor_.stopped_by());
  const AttemptOutcome outcome = ClassifyParityCheck(exit, ReportPassed(out.report));
  const std::string message = DescribeParity(outcome, plan, config_.parity_updates,
                                             *run.parity_seconds, *out.exit, out.report, out.error);
  nlohmann::json details = out.report.is_object() ? out.report : nlohmann::json::object();
  details["wall_seconds"] = *run.parity_seconds;
  if (out.error.is_object()) details["error"] = out.error;
  Record(run.id, "parity",
         outcome == AttemptOutcome::kSucceeded ? store::Severity::kInfo
         : CallsForFallback(outcome)           ? store::Severity::kError
                                               : store::Severity::kWarning,
         message, details.dump());
  if (outcome == AttemptOutcome::kSucceeded) co_return std::nullopt;
  co_return Refusal{outcome, message};
}

asio::awaitable<void> NightlyCycle::ProfileNewPlan(const ActiveConfig& active,
                                                   const Attempt& attempt,
                                                   const std::string& plan_path,
                                                   std::int64_t run_id) {
  if (IsValidated(attempt)) co_return;  // profiled when it first trained
  if (active.spec.runtime.device != "cpu") {
    Record(run_id, "profile_skipped", store::Severity::kInfo,
           "the op profile times ops on the host: a " + active.spec.runtime.device +
               " plan is not profiled");
    co_return;
  }
  Progress("profiling", run_id);
  const StateLayout layout(config_.state_dir);
  const std::string trace = layout.ProfileTrace(run_id);
  const std::vector<std::string> args = {"--plan",
                                         plan_path,
                                         "--profile",
                                         "--profile-updates",
                                         std::to_string(kProfileUpdates),
                                         "--profile-trace",
                                         trace};
  const WorkerReportOutput out = co_await RunReportMode(active, args, layout.RunLog(run_id));
  if (!out.exit.ok() || !out.exit->exited || out.exit->code != 0 || !out.report.is_object()) {
    const std::string why = !out.exit.ok()          ? out.exit.status().message()
                            : out.error.is_object() ? out.error.value("message", "")
                                                    : out.exit->Describe();
    Record(run_id, "profile_failed", store::Severity::kWarning,
           "the op profile of the plan failed (training goes on): " + why);
    co_return;
  }
  std::string summary = "op profile of " + std::to_string(kProfileUpdates) + " updates: ";
  for (const nlohmann::json& g : out.report.value("groups", nlohmann::json::array())) {
    if (g.value("share", 0.0) >= 0.05) {
      summary +=
          g.value("group", std::string()) + Format(" %.0f%%", 100 * g.value("share", 0.0)) + ", ";
    }
  }
  Record(run_id, "profile", store::Severity::kInfo, summary + "trace " + trace, out.report.dump());
}

struct NightlyCycle::Training {
  Result<ProcessExit> process = Status::Internal("not run");
  WorkerReport report;
  WorkerExit exit;
  AttemptOutcome outcome = AttemptOutcome::kCrashed;
};

asio::awaitable<NightlyCycle::AttemptResult> NightlyCycle::RunAttempt(
    const ActiveConfig& active, Attempt& attempt, std::optional<std::int64_t> fallback_of) {
  AttemptResult result;
  store::RunRecord run;
  if (!BeginRun(active, attempt, fallback_of, run, result)) co_return result;

  Result<std::optional<store::RunPlan>> plan = co_await Plan(active, attempt, run.id);
  if (!plan.ok() || !*plan) {
    const bool oom = !plan.ok() && plan.status().code() == Status::Code::kOutOfMemory;
    WorkerExit exit;
    exit.stopped_by = supervisor_.stopped_by();
    const AttemptOutcome o = oom ? AttemptOutcome::kOom
                             : exit.stopped_by != WorkerExit::StoppedBy::kNobody
                                 ? ClassifyExit(exit)
                                 : AttemptOutcome::kCrashed;
    FinishAttempt(run, result, o, plan.ok() ? "planning failed" : plan.status().message(), {}, {});
    co_return result;
  }
  const std::string plan_path = StateLayout(config_.state_dir).PlanFile();
  if (Status s = AdoptPlan(attempt.plan, plan_path, run); !s.ok()) {
    FinishAttempt(run, result, AttemptOutcome::kCrashed, s.message(), {}, {});
    co_return result;
  }
  const Ledger ledger = co_await MeasureLedger(active, plan_path, run.id);
  run.peak_memory = ledger.memory;
  const std::optional<Refusal> refusal =
      co_await CheckPlanBeforeTraining(active, attempt, plan_path, ledger, run);
  if (refusal) {
    FinishAttempt(run, result, refusal->outcome, refusal->message, {}, {});
    co_return result;
  }
  co_await ProfileNewPlan(active, attempt, plan_path, run.id);

  Training training = co_await Train(active, plan_path, run.id);
  if (!training.process.ok()) {
    FinishAttempt(run, result, AttemptOutcome::kCrashed, training.process.status().message(),
                  training.report.TakeMetrics(), training.report.evals());
    co_return result;
  }
  FillFromReport(active, training.report, run);
  if (training.outcome != AttemptOutcome::kSucceeded) {
    const std::string message = DescribeFailure(training);
    Record(run.id, "run_" + std::string(ToString(training.outcome)),
           training.outcome == AttemptOutcome::kDeadline ||
                   training.outcome == AttemptOutcome::kInterrupted
               ? store::Severity::kWarning
               : store::Severity::kError,
           message);
    FinishAttempt(run, result, training.outcome, message, training.report.TakeMetrics(),
                  training.report.evals());
    co_return result;
  }
  JudgeAndRelease(active, training.report, run, result);
  co_return result;
}

bool NightlyCycle::BeginRun(const ActiveConfig& active, const Attempt& attempt,
                            std::optional<std::int64_t> fallback_of, store::RunRecord& run,
                            AttemptResult& result) {
  run.config_hash = active.version.hash;
  run.fallback_of = fallback_of;
  run.created_at = clock_.Now();
  run.deadline_at = window_.deadline;
  run.hardware = hardware_;
  run.software.trainerd_version = TrainerdVersion();
  run.world_size = active.spec.distributed.ranks;
  Result<std::int64_t> id = store_.CreateRun(run);
  if (!id.ok()) {
    result.message = "cannot record the run: " + id.status().message();
    Record(std::nullopt, "store_error", store::Severity::kError, result.message);
    return false;
  }
  run.id = result.run_id = *id;
  (void)store_.MarkRunStarted(run.id, clock_.Now());
  run.started_at = clock_.Now();
  run.status = store::RunStatus::kRunning;
  if (metrics_) metrics_->RunStarted();
  Record(run.id, "run_started", store::Severity::kInfo,
         "config " + Short(run.config_hash) + ", plan source " +
             std::string(ToString(attempt.source)) +
             (fallback_of ? ", replacing run " + std::to_string(*fallback_of) : ""),
         nlohmann::json{{"config_hash", run.config_hash},
                        {"plan_source", std::string(ToString(attempt.source))},
                        {"fallback_of", fallback_of ? nlohmann::json(*fallback_of) : nullptr}}
             .dump());
  return true;
}

Status NightlyCycle::AdoptPlan(const store::RunPlan& plan, const std::string& plan_path,
                               store::RunRecord& run) {
  run.plan = plan;
  // Stored now, so that a run interrupted from here on names the plan it had.
  if (Status s = store_.SetRunPlan(run.id, plan); !s.ok()) {
    Record(run.id, "store_error", store::Severity::kError, s.message());
  }
  return files_.WriteAtomically(plan_path, PlanJson(plan).dump() + "\n");
}

void NightlyCycle::FinishAttempt(store::RunRecord& run, AttemptResult& result,
                                 AttemptOutcome outcome, const std::string& message,
                                 std::vector<store::UpdateMetric> metrics,
                                 const std::vector<store::SliceEval>& evals, bool regressed) {
  result.outcome = outcome;
  result.status = regressed ? store::RunStatus::kRegressed : RunStatusFor(outcome);
  result.message = message;
  run.status = result.status;
  run.ended_at = clock_.Now();
  if (Status s = store_.FinishRun(run, metrics, evals, {}); !s.ok()) {
    Record(run.id, "store_error", store::Severity::kError, s.message());
  }
  if (metrics_) metrics_->RunFinished(run, FinalSliceLosses(evals));
}

asio::awaitable<NightlyCycle::Training> NightlyCycle::Train(const ActiveConfig& active,
                                                            const std::string& plan_path,
                                                            std::int64_t run_id) {
  const StateLayout layout(config_.state_dir);
  Progress("training", run_id);
  std::vector<std::string> argv = WorkerArgs(active);
  argv.insert(argv.end(),
              {"--plan", plan_path, "--output-dir", layout.WorkDir(), "--resume-if-compatible"});
  if (active.spec.init_from.current_release && !CurrentReleaseWeights(config_.state_dir)) {
    Record(run_id, "init_from_none", store::Severity::kInfo,
           "init_from: current_release: no current release with weights yet, so the model "
           "starts from its random initialisation");
  }
  Training training;
  WorkerReport& report = training.report;
  const std::optional<std::int64_t> ooms_before = CgroupOomKillCount();
  bool warned_late = false;
  std::function<void(const std::string&)> on_line = [&](const std::string& line) {
    report.Consume(line, clock_.Now());
    for (store::Event& e : report.TakeEvents()) {
      e.run_id = run_id;
      RecordAndLog(store_, e);
    }
    if (report.pending_metrics() >= kMetricBatch) {
      metric_writer_.Append(run_id, report.TakeMetrics());
    }
    progress_.update = report.updates_done();
    progress_.updates = report.updates();
    progress_.eta_seconds = report.eta_seconds();
    if (metrics_) metrics_->Progress(window_.deadline, clock_.Now() + report.eta_seconds());
    if (!warned_late && report.updates_done() > 2 &&
        clock_.Now() + report.eta_seconds() > window_.deadline) {
      warned_late = true;
      Record(run_id, "eta_beyond_deadline", store::Severity::kWarning,
             Format("the worker's ETA is %.0f s but %.0f s are left before the deadline",
                    report.eta_seconds(), window_.deadline - clock_.Now()));
    }
    Progress("training", run_id);
  };
  // A data-parallel job's ranks start under its launcher, which the supervisor signals.
  const char* search_path = std::getenv("PATH");
  Result<std::vector<std::string>> command = RankLaunchCommand(
      active.spec.distributed,
      (std::filesystem::path(config_.worker_path).parent_path() / "trainer-launch").string(), argv,
      search_path != nullptr ? search_path : "/usr/bin:/bin");
  if (!command.ok()) {
    training.process = command.status();
    co_return training;
  }
  const LaunchSpec launch{*command, layout.RunLog(run_id)};
  training.process = co_await supervisor_.Run(launch, Limits(), on_line);
  if (Status s = metric_writer_.Drain(); !s.ok()) {
    Record(run_id, "store_error", store::Severity::kError, s.message());
  }
  if (!training.process.ok()) co_return training;
  training.exit = ExitOf(*training.process, report.error(), ooms_before, supervisor_.stopped_by());
  training.exit.saw_finish = report.finish().is_object();
  training.outcome = ClassifyExit(training.exit);
  co_return training;
}

void NightlyCycle::FillFromReport(const ActiveConfig& active, const WorkerReport& report,
                                  store::RunRecord& run) const {
  const nlohmann::json& start = report.start();
  if (start.is_object()) {
    const nlohmann::json software = start.value("software", nlohmann::json::object());
    run.software.libtorch_version = software.value("torch_version", "");
    run.software.blas = software.value("blas", "");
    run.software.compiler = software.value("compiler", "");
    run.shapes_json = nlohmann::json{{"model", start.value("model", nlohmann::json::object())},
                                     {"effective_batch", start.value("effective_batch", 0)}}
                          .dump();
    // The seed is a uint64 (read as an int it would wrap); absent when it was mistyped.
    run.seeds_json =
        nlohmann::json{{"training", start.contains("seed") ? start["seed"] : nlohmann::json()}}
            .dump();
    run.data_fingerprint = start.value("data", nlohmann::json::object()).value("fingerprint", "");
  }
  const nlohmann::json& fin = report.finish();
  if (!fin.is_object()) return;
  run.throughput_method = fin.value("throughput_method", "");
  // Null (a worker that resumed at the job's last update trained nothing) stays empty.
  const auto number = [&fin](const char* key) -> std::optional<double> {
    const auto it = fin.find(key);
    if (it == fin.end() || !it->is_number()) return std::nullopt;
    return it->get<double>();
  };
  run.samples_per_second = number("samples_per_second");
  run.tokens_per_second = number("tokens_per_second");
  run.mfu = number("mfu");
  run.final_loss = number("final_train_loss");
  if (!run.peak_memory) run.peak_memory = store::MemoryByCategory{};
  run.peak_memory->peak = fin.value("peak_bytes", std::int64_t{0});
  const int resumed_from = start.is_object() ? start.value("resumed_from_update", 0) : 0;
  const double samples = static_cast<double>(fin.value("updates", 0) - resumed_from) *
                         active.spec.training.effective_batch;
  // Every rank holds a device for the run's duration.
  const double device_hours = fin.value("elapsed_seconds", 0.0) / 3600 * run.world_size;
  if (samples > 0) run.cost_per_sample = config_.cost.per_device_hour * device_hours / samples;
}

std::string NightlyCycle::DescribeFailure(const Training& training) {
  const WorkerReport& report = training.report;
  std::string message = training.exit.stopped_by != WorkerExit::StoppedBy::kNobody
                            ? "stopped (" + std::string(ToString(training.outcome)) + "), worker " +
                                  training.process->Describe()
                            : "worker " + training.process->Describe();
  if (report.error().is_object()) message += ": " + report.error().value("message", "");
  if (report.last_checkpoint_update()) {
    message += "; checkpoint at update " + std::to_string(*report.last_checkpoint_update());
  }
  return message;
}

void NightlyCycle::JudgeAndRelease(const ActiveConfig& active, WorkerReport& report,
                                   store::RunRecord& run, AttemptResult& result) {
  Result<std::optional<store::RunRecord>> baseline = store_.LastSucceededRun(hardware_);
  const ThroughputVerdict throughput =
      CheckThroughput(run.samples_per_second, baseline.ok() ? *baseline : std::nullopt,
                      run.shapes_json, config_.regression.throughput_tolerance);
  Record(run.id, throughput.regressed ? "throughput_regressed" : "throughput_check",
         throughput.regressed ? store::Severity::kError : store::Severity::kInfo,
         throughput.reason);
  const GateVerdict gate = GateAgainstCurrentRelease(report, active.spec.init_from.current_release);
  Record(run.id, gate.pass ? "gate_passed" : "gate_failed",
         gate.pass ? store::Severity::kInfo : store::Severity::kError, gate.reason, gate.ToJson());
  const bool regressed = throughput.regressed || !gate.pass;
  FinishAttempt(run, result, AttemptOutcome::kSucceeded,
                throughput.regressed ? throughput.reason
                : regressed          ? gate.reason
                                     : "finished inside the window",
                report.TakeMetrics(), report.evals(), regressed);
  result.released = PublishModel(report.finish(), gate, regressed, run);
  UpdateConfigState(active, run, regressed, result.message);
  // The job is done: the next night trains afresh rather than resuming a finished job.
  files_.Remove(StateLayout(config_.state_dir).WorkDir() + "/checkpoint.pt");
}

GateVerdict NightlyCycle::GateAgainstCurrentRelease(const WorkerReport& report,
                                                    bool started_from_it) {
  std::optional<std::map<std::string, double>> reference;
  std::optional<std::int64_t> reference_run;
  bool on_this_data = false;
  if (Result<std::optional<store::Release>> current = store_.CurrentRelease();
      current.ok() && *current) {
    reference_run = (*current)->run_id;
    if (started_from_it && !report.initial_losses().empty()) {
      // The run started from the current release (init_from): its initial eval is that
      // release on this run's held-out data, whatever data the release was trained on.
      reference = report.initial_losses();
      on_this_data = true;
    } else if (Result<std::vector<store::SliceEval>> stored = store_.GetSliceEvals(*reference_run);
               stored.ok()) {
      reference = FinalSliceLosses(*stored);
    }
  }
  GateVerdict gate =
      ReleaseGate(FinalSliceLosses(report.evals()), reference, reference_run, config_.regression);
  if (on_this_data) gate.reason += ", evaluated on this run's held-out data before training";
  gate.reference_evaluated_here = on_this_data;
  return gate;
}

Result<std::string> NightlyCycle::CopyReleaseFiles(const nlohmann::json& fin,
                                                   const store::RunRecord& run, bool released,
                                                   const std::string& dir) {
  const std::string sha = fin.value("model_sha256", "");
  Result<std::string> copied = files_.CopyVerified(
      fin.value("model_path", StateLayout(config_.state_dir).WorkDir() + "/model.pt"),
      dir + "/model.pt", sha);
  if (!copied.ok()) return copied.status();
  const nlohmann::json model_files = fin.value("model_files", nlohmann::json::object());
  if (!model_files.contains("weights") || !model_files.contains("description")) return copied;
  const std::string weights_sha = model_files.value("weights_sha256", "");
  Result<std::string> weights =
      files_.CopyVerified(model_files["weights"], dir + "/model.safetensors", weights_sha);
  if (!weights.ok()) return weights.status();
  Result<std::string> text = files_.Read(model_files["description"]);
  if (!text.ok()) return text.status();
  nlohmann::json description = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!description.is_object()) {
    return Status::Corruption(model_files["description"].get<std::string>() +
                              ": the model description is not a JSON object");
  }
  description["release"] = {{"run_id", run.id},        {"config_hash", run.config_hash},
                            {"model_sha256", sha},     {"weights_sha256", weights_sha},
                            {"gate_passed", released}, {"published_at", clock_.Now()}};
  if (Status s = files_.WriteAtomically(dir + "/model.json", description.dump(2) + "\n"); !s.ok()) {
    return s;
  }
  return copied;
}

bool NightlyCycle::PublishModel(const nlohmann::json& fin, const GateVerdict& gate, bool regressed,
                                const store::RunRecord& run) {
  // The model artifact: published (hashed) either way, current only through the gate.
  if (!fin.contains("model_sha256")) {  // dropped unless 64 hex digits: it names the folder
    Record(run.id, "release_failed", store::Severity::kError,
           "the worker reported no valid model_sha256: nothing published");
    return false;
  }
  const std::string dir =
      StateLayout(config_.state_dir).ReleaseDir(run.id, fin["model_sha256"], !regressed);
  Result<std::string> sha = CopyReleaseFiles(fin, run, !regressed, dir);
  if (!sha.ok()) {
    Record(run.id, "release_failed", store::Severity::kError, sha.status().message());
    return false;
  }
  store::Release release;
  release.run_id = run.id;
  release.artifact_path = dir + "/model.pt";
  release.artifact_hash = *sha;
  release.gate_passed = !regressed;
  release.gate_details_json = gate.ToJson();
  release.created_at = clock_.Now();
  Result<std::int64_t> release_id = store_.RecordRelease(release);
  if (release_id.ok() && !regressed && store_.SetCurrentRelease(*release_id).ok()) {
    Record(run.id, "released", store::Severity::kInfo,
           "model " + Short(*sha) + " is the current release (" + dir + ")");
    if (Status s = LinkCurrentRelease(files_, config_.state_dir, release.artifact_path); !s.ok()) {
      Record(run.id, "release_link_failed", store::Severity::kError,
             "releases/current still names the previous release: " + s.message());
    }
    return true;
  }
  if (regressed) {
    Record(run.id, "release_withheld", store::Severity::kWarning,
           "model " + Short(*sha) + " not released; the current release stays");
  }
  return false;
}

void NightlyCycle::UpdateConfigState(const ActiveConfig& active, const store::RunRecord& run,
                                     bool regressed, const std::string& message) {
  if (!regressed) {
    (void)store_.SetConfigState({run.config_hash, store::ConfigState::kKnownGood,
                                 "run " + std::to_string(run.id) + " finished inside its window",
                                 clock_.Now(), run.id});
    return;
  }
  if (!MarkBadAfterRegression(active.version.state)) return;
  (void)store_.SetConfigState({run.config_hash, store::ConfigState::kBad,
                               "run " + std::to_string(run.id) + " regressed: " + message,
                               clock_.Now(), run.id});
  Result<std::optional<store::ConfigVersion>> known_good = store_.LastKnownGoodConfig();
  if (known_good.ok() && *known_good) {
    if (metrics_) metrics_->Rollback("regression");
    Record(run.id, "rollback", store::Severity::kWarning,
           "candidate config " + Short(run.config_hash) +
               " regressed: marked bad, active config rolled back to known-good " +
               Short((*known_good)->hash),
           nlohmann::json{
               {"from", run.config_hash}, {"to", (*known_good)->hash}, {"reason", "regression"}}
               .dump());
  }
}

}  // namespace trainerd::daemon
