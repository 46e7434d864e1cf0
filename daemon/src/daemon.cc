#include "trainerd/daemon/daemon.h"

#include <grp.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <iterator>
#include <map>
#include <thread>

#include "trainerd/daemon/control_queries.h"
#include "trainerd/daemon/current_release.h"
#include "trainerd/daemon/event_log.h"
#include "trainerd/daemon/host_fingerprint.h"
#include "trainerd/daemon/log.h"
#include "trainerd/daemon/outcome_lines.h"
#include "trainerd/daemon/policy.h"
#include "trainerd/daemon/schedule.h"
#include "trainerd/daemon/state_layout.h"
#include "trainerd/trainer/spec/job_spec_parser.h"
#include "trainerd/trainer/spec/worker_protocol.h"

namespace trainerd::daemon {

namespace {

bool IsTrainerRun(pid_t pid) {
  std::ifstream cmdline("/proc/" + std::to_string(pid) + "/cmdline");
  const std::string text((std::istreambuf_iterator<char>(cmdline)),
                         std::istreambuf_iterator<char>());
  return text.find("trainer-run") != std::string::npos;
}

// The planner's last choice in the store's recent events, if any.
std::optional<ChosenPlan> LastPlannerChoice(store::Store& store) {
  Result<std::vector<store::Event>> events = store.ListRecentEvents(1000);
  if (!events.ok()) return std::nullopt;
  for (const store::Event& e : *events) {
    if (e.kind != "plan") continue;
    const nlohmann::json details = nlohmann::json::parse(e.details_json, nullptr, false);
    if (!details.is_object() || !details.contains("planner")) continue;
    std::vector<std::string> mistyped;
    ChosenPlan chosen = Parse<ChosenPlan>(details["planner"], &mistyped);
    if (mistyped.empty()) return chosen;
  }
  return std::nullopt;
}

}  // namespace

Daemon::Daemon(asio::io_context& io, DaemonConfig config, std::string config_path,
               std::string state_dir_override, const Clock& clock, Options options)
    : io_(io),
      config_(std::move(config)),
      config_path_(std::move(config_path)),
      state_dir_override_(std::move(state_dir_override)),
      clock_(clock),
      options_(options),
      signals_(io, SIGTERM, SIGINT, SIGHUP),
      wake_(io),
      watchdog_(io),
      outcome_timer_(io) {}

void Daemon::StopStaleWorker() {
  std::ifstream in(StateLayout(config_.state_dir).WorkerPidFile());
  pid_t pid = 0;
  if (!(in >> pid) || pid <= 1 || ::kill(pid, 0) != 0 || !IsTrainerRun(pid)) return;
  // A worker of a daemon that died: it got SIGTERM then (PR_SET_PDEATHSIG) and is writing
  // its checkpoint. Let it finish within the grace period, so the resume starts from there.
  Log(LogPriority::kNotice,
      "waiting for worker " + std::to_string(pid) + " left by a previous daemon");
  ::kill(pid, SIGTERM);
  const double give_up = clock_.Now() + config_.schedule.deadline_grace_seconds;
  while (::kill(pid, 0) == 0 && IsTrainerRun(pid) && clock_.Now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (::kill(pid, 0) == 0 && IsTrainerRun(pid)) ::kill(pid, SIGKILL);
}

Status Daemon::Recover() {
  StopStaleWorker();
  Result<std::vector<std::int64_t>> interrupted = store_->MarkUnfinishedAsInterrupted(clock_.Now());
  if (!interrupted.ok()) return interrupted.status();
  for (std::int64_t id : *interrupted) {
    RecordAndLog(*store_, {0, clock_.Now(), id, "run_interrupted", store::Severity::kWarning,
                           "the daemon stopped before this run finished (restart)", "{}"});
  }
  return Status::Ok();
}

void Daemon::RestoreMetrics() {
  Result<std::vector<store::RunRecord>> last = store_->ListRecentRuns(1);
  if (last.ok() && !last->empty() && store::IsFinished(last->front().status)) {
    const store::RunRecord& run = last->front();
    Result<std::vector<store::SliceEval>> evals = store_->GetSliceEvals(run.id);
    metrics_->RunFinished(
        run, evals.ok() ? FinalSliceLosses(*evals) : std::map<std::string, double>{}, false);
  }
  if (Result<JobSpec> job = ParseJobSpecFile(config_.job_path); job.ok()) {
    metrics_->Budget(job->memory.budget_bytes, job->memory.usable_bytes());
  }
  if (const std::optional<ChosenPlan> chosen = LastPlannerChoice(*store_)) {
    metrics_->PlanTimed(chosen->TimeModelError());
  }
  Result<std::vector<store::RunRecord>> success =
      store_->ListRunsByStatus(store::RunStatus::kSucceeded, 1);
  if (success.ok() && !success->empty() && success->front().ended_at) {
    metrics_->LastSuccess(*success->front().ended_at);
  }
}

Status Daemon::StartControlServer() {
  std::optional<gid_t> allowed_group;
  if (!config_.control_group.empty()) {
    const struct group* g = ::getgrnam(config_.control_group.c_str());
    if (g == nullptr) {
      return Status::InvalidArgument(config_path_ + ": control.group: no group named '" +
                                     config_.control_group + "'");
    }
    allowed_group = g->gr_gid;
  }
  Result<std::unique_ptr<ControlServer>> server = ControlServer::Start(
      io_, config_.socket_path, allowed_group,
      [this](const nlohmann::json& request) { return HandleControl(request); });
  if (!server.ok()) return server.status();
  control_ = std::move(*server);
  return Status::Ok();
}

nlohmann::json Daemon::HandleControl(const nlohmann::json& request) {
  const std::string command = request["command"];
  if (command == "status") {
    nlohmann::json status = status_cache_->Answer(config_.job_path);
    if (!status.value("ok", false)) return status;
    nlohmann::json& r = status["result"];
    const double now = clock_.Now();
    r["daemon"] = {{"pid", ::getpid()},
                   {"version", TrainerdVersion()},
                   {"phase", cycle_running_ ? progress_.phase : "idle"},
                   {"stopping", stopping_}};
    r["next_start"] = options_.once ? nlohmann::json(nullptr)
                                    : nlohmann::json(NextWindow(now, config_.schedule).start);
    r["current_run"] = nullptr;
    if (cycle_running_ && progress_.run_id) {
      r["current_run"] = {{"id", *progress_.run_id},
                          {"phase", progress_.phase},
                          {"update", progress_.update},
                          {"updates", progress_.updates},
                          {"eta_seconds", progress_.eta_seconds},
                          {"deadline", progress_.deadline},
                          {"margin_seconds", progress_.deadline - (now + progress_.eta_seconds)}};
    }
    return status;
  }
  if (command == "runs" || command == "show" || command == "report" || command == "configs") {
    return AnswerFromStore(*store_, config_.job_path, request);
  }
  if (command == "run-now") {
    if (cycle_running_) return Error(kConflict, "a cycle is already running");
    if (stopping_ || options_.once) return Error(kConflict, "the daemon is not taking cycles");
    run_now_ = true;
    wake_.cancel();
    return Ok({{"started", true}});
  }
  if (command == "cancel") {
    if (!cycle_running_) return Error(kConflict, "no run in progress");
    supervisor_->Stop(WorkerExit::StoppedBy::kOperator, config_.schedule.deadline_grace_seconds);
    return Ok({{"cancelled", progress_.run_id ? nlohmann::json(*progress_.run_id) : nullptr}});
  }
  if (command == "rollback") return Rollback(request);
  if (command == "outcome") return RecordOutcomes(request);
  if (command == "release") return ReleaseCommand(request);
  return Error(kBadRequest, "unknown command '" + command + "'");
}

nlohmann::json Daemon::Rollback(const nlohmann::json& request) {
  if (request.contains("model") && !request["model"].is_boolean()) {
    return Error(kBadRequest, "rollback: model must be true or false");
  }
  return request.value("model", false) ? RollbackModel(request) : RollbackConfig(request);
}

// The model: back to the newest gate-passed release older than the current one that was not
// withdrawn, or to the release given; releases/current follows.
nlohmann::json Daemon::RollbackModel(const nlohmann::json& request) {
  const double now = clock_.Now();
  Result<std::vector<store::Release>> releases = store_->ListReleases(10000);
  if (!releases.ok()) return Error(kInternalError, "cannot read releases");
  std::optional<std::int64_t> target;
  if (request.contains("release")) {
    if (!request["release"].is_number_integer()) {
      return Error(kBadRequest, "rollback: release must be an integer id");
    }
    target = request["release"].get<std::int64_t>();
  } else {
    target = ModelRollbackTarget(*releases);
    if (!target) return Error(kNotFound, "no earlier released model to roll back to");
  }
  if (Status s = store_->SetCurrentRelease(*target, now); !s.ok()) {
    return Error(s.code() == Status::Code::kNotFound ? kNotFound : kConflict, s.message());
  }
  for (const store::Release& r : *releases) {
    if (r.id != *target) continue;
    if (Status s = LinkCurrentRelease(files_, config_.state_dir, r.artifact_path); !s.ok()) {
      RecordAndLog(*store_,
                   {0, now, std::nullopt, "release_link_failed", store::Severity::kError,
                    "releases/current still names the previous release: " + s.message(), "{}"});
    }
  }
  RecordAndLog(*store_, {0, now, std::nullopt, "model_rollback", store::Severity::kWarning,
                         "operator made release " + std::to_string(*target) + " current",
                         nlohmann::json{{"release", *target}}.dump()});
  return Ok({{"current_release", *target}});
}

// The config: pin a version as the active known-good one, and mark the job file's newer
// version bad so that the next cycle runs the pinned one.
nlohmann::json Daemon::RollbackConfig(const nlohmann::json& request) {
  const double now = clock_.Now();
  const nlohmann::json active = ActiveConfigJson(*store_, config_.job_path);
  std::string target;
  if (request.contains("to")) {
    if (!request["to"].is_string() || request["to"].get<std::string>().size() < 4) {
      return Error(kBadRequest, "rollback: to must be a config hash or a prefix of 4+ characters");
    }
    const std::string prefix = request["to"];
    Result<std::vector<store::ConfigVersion>> versions = store_->ListConfigVersions();
    if (!versions.ok()) return Error(kInternalError, versions.status().message());
    for (const store::ConfigVersion& v : *versions) {
      if (v.hash.rfind(prefix, 0) != 0) continue;
      if (!target.empty()) return Error(kBadRequest, "rollback: '" + prefix + "' is ambiguous");
      target = v.hash;
    }
    if (target.empty()) return Error(kNotFound, "no config version " + prefix);
  } else {
    Result<std::vector<store::ConfigVersion>> versions = store_->ListConfigVersions();
    if (!versions.ok()) return Error(kInternalError, versions.status().message());
    for (const store::ConfigVersion& v : *versions) {  // newest first
      if (v.state == store::ConfigState::kKnownGood && v.hash != active.value("hash", "")) {
        target = v.hash;
        break;
      }
    }
    if (target.empty()) return Error(kNotFound, "no other known-good config version");
  }
  const std::string reason = "rolled back by an operator to " + target.substr(0, 12);
  // The rollback is the two states: a store that refuses either has rolled nothing back.
  if (active.contains("hash") && active["hash"] != target) {
    if (Status s = store_->SetConfigState({active["hash"], store::ConfigState::kBad, reason, now});
        !s.ok()) {
      return Error(kInternalError, "rollback: " + s.message());
    }
  }
  if (Status s = store_->SetConfigState({target, store::ConfigState::kKnownGood, reason, now});
      !s.ok()) {
    return Error(kInternalError, "rollback: " + s.message());
  }
  RecordAndLog(
      *store_,
      {0, now, std::nullopt, "rollback", store::Severity::kWarning, reason,
       nlohmann::json{{"from", active.value("hash", "")}, {"to", target}, {"reason", "operator"}}
           .dump()});
  metrics_->Rollback("operator");
  return Ok({{"active_config", target}});
}

Result<store::Release> Daemon::OutcomeRelease(const std::string& name) {
  if (name.size() < 12) {  // an id (OutcomeLineFromJson allows nothing else this short)
    Result<store::Release> release = store_->GetRelease(std::stoll(name));
    if (!release.ok() && release.status().code() == Status::Code::kNotFound) {
      return Status::NotFound("release " + name + " is unknown");
    }
    return release;
  }
  Result<std::vector<store::Release>> found = store_->FindReleasesByArtifact(name);
  if (!found.ok()) return found.status();
  for (const store::Release& r : *found) {  // newest first
    if (r.artifact_hash != found->front().artifact_hash) {
      return Status::InvalidArgument("model hash " + name + " starts more than one model's");
    }
  }
  for (const store::Release& r : *found) {
    if (r.live_at) return r;
  }
  if (!found->empty()) return found->front();
  return Status::NotFound("no release holds a model whose sha256 starts with " + name);
}

// trainerctl outcome add / import: every line checked and resolved, then stored in one
// transaction; a bad line refuses them all, naming it.
nlohmann::json Daemon::RecordOutcomes(const nlohmann::json& request) {
  const double now = clock_.Now();
  const nlohmann::json& items = request.contains("outcomes") ? request["outcomes"] : nullptr;
  if (!items.is_array() || items.empty()) {
    return Error(kBadRequest, "outcome: outcomes must be a list of one or more outcomes");
  }
  if (request.contains("source") && !request["source"].is_string()) {
    return Error(kBadRequest, "outcome: source must be a string");
  }
  const std::string source = request.value("source", "outcome");
  std::vector<store::Outcome> outcomes;
  std::vector<std::string> names;
  std::map<std::string, store::Release> resolved;  // by the name the lines give
  for (const nlohmann::json& item : items) {
    const nlohmann::json line_json =
        item.is_object() ? item.value("line", nlohmann::json()) : nlohmann::json();
    const std::int64_t line_number =
        line_json.is_number_integer() ? line_json.get<std::int64_t>() : 0;
    const std::string where = source + (line_number > 0 ? ":" + std::to_string(line_number) : "");
    Result<OutcomeLine> line = OutcomeLineFromJson(item, where);
    if (!line.ok()) return Error(kBadRequest, line.status().message());
    auto known = resolved.find(line->release);
    Result<store::Release> release = known != resolved.end() ? Result<store::Release>(known->second)
                                                             : OutcomeRelease(line->release);
    if (!release.ok()) {
      return Error(
          release.status().code() == Status::Code::kInternal ? kInternalError : kBadRequest,
          where + ": " + release.status().message());
    }
    resolved.emplace(line->release, *release);
    const std::string name = "release " + std::to_string(release->id);
    if (!release->live_at) {
      return Error(kBadRequest, where + ": " + name +
                                    " never went live (its gate withheld it), so it has no "
                                    "outcomes");
    }
    // A line without a time takes the time it arrives, a microsecond apart from the others
    // of the import so that two such lines are two outcomes.
    const double at = line->at.value_or(now + 1e-6 * static_cast<double>(outcomes.size()));
    if (at < *release->live_at) {
      return Error(kBadRequest, where + ": at " + FormatUtc(at) + " is before " + name +
                                    " went live (" + FormatUtc(*release->live_at) + ")");
    }
    if (at > now + 300) {
      return Error(kBadRequest, where + ": at " + FormatUtc(at) + " is in the future");
    }
    outcomes.push_back({release->id, line->slice, line->metric, at, line->value, line->count});
    names.push_back(where);
  }
  Result<std::int64_t> added = store_->RecordOutcomes(outcomes, names);
  if (!added.ok()) {
    return Error(
        added.status().code() == Status::Code::kInvalidArgument ? kBadRequest : kInternalError,
        added.status().message());
  }
  RecordAndLog(
      *store_,
      {0, now, std::nullopt, "outcomes_recorded", store::Severity::kInfo,
       std::to_string(*added) + " outcomes recorded from " + source + " (" +
           std::to_string(outcomes.size() - *added) + " already stored)",
       nlohmann::json{{"source", source}, {"added", *added}, {"lines", outcomes.size()}}.dump()});
  if (!cycle_running_) CheckOutcomes();  // else after the cycle, which may be releasing
  return Ok({{"added", *added}, {"already_stored", outcomes.size() - *added}});
}

// trainerctl release pin|unpin|show ID.
nlohmann::json Daemon::ReleaseCommand(const nlohmann::json& request) {
  const nlohmann::json action_json = request.value("action", nlohmann::json());
  const std::string action = action_json.is_string() ? action_json.get<std::string>() : "";
  if (action == "show") {
    nlohmann::json answer = AnswerFromStore(*store_, config_.job_path, request);
    if (!answer.value("ok", false) || !answer["result"]["release"].value("current", false)) {
      return answer;
    }
    if (Result<std::optional<OutcomeVerdict>> verdict = outcome_watch_->Verdict();
        verdict.ok() && *verdict) {
      answer["result"]["verdict"] = ToJson(**verdict);
    }
    return answer;
  }
  if (action != "pin" && action != "unpin") {
    return Error(kBadRequest, "release: action must be pin, unpin or show");
  }
  if (!request.contains("release") || !request["release"].is_number_integer()) {
    return Error(kBadRequest, "release: release must be an integer id");
  }
  const std::int64_t id = request["release"];
  if (Status s = store_->SetReleasePinned(id, action == "pin"); !s.ok()) {
    return Error(s.code() == Status::Code::kNotFound ? kNotFound : kInternalError, s.message());
  }
  RecordAndLog(*store_,
               {0, clock_.Now(), std::nullopt, "release_" + action + "ned", store::Severity::kInfo,
                "operator " + action + "ned release " + std::to_string(id) +
                    (action == "pin" ? ": its outcomes never roll it back"
                                     : ": its outcomes may roll it back again"),
                nlohmann::json{{"release", id}}.dump()});
  return Ok(ReleaseJson(*store_->GetRelease(id)));
}

void Daemon::CheckOutcomes() {
  if (Result<std::optional<OutcomeVerdict>> verdict = outcome_watch_->Check(); !verdict.ok()) {
    Log(LogPriority::kError, "outcomes: " + verdict.status().message());
  }
}

void Daemon::ApplyRetention() {
  if (Result<RetentionReport> report = retention_->Apply(); !report.ok()) {
    Log(LogPriority::kError, "retention: " + report.status().message());
  }
}

void Daemon::ArmOutcomeCheck() {
  outcome_timer_.expires_after(TimerDelay(config_.outcomes.check_interval_seconds));
  outcome_timer_.async_wait([this](const boost::system::error_code& ec) {
    // A wait that completed just before Main cancelled it runs after the store closed.
    if (ec || stopping_ || !store_) return;
    if (!cycle_running_) CheckOutcomes();
    ArmOutcomeCheck();
  });
}

bool Daemon::CycleDue(const Window& window) {
  if (last_cycle_window_ && *last_cycle_window_ == window.start) return false;
  Result<std::vector<store::RunRecord>> runs = store_->ListRecentRuns(50);
  if (!runs.ok()) return false;
  for (const store::RunRecord& run : *runs) {  // newest first
    if (run.created_at < window.start || run.created_at >= window.deadline) continue;
    // The newest run of the window decides: only an interrupted one leaves work to resume.
    return run.status == store::RunStatus::kInterrupted;
  }
  return true;
}

// The newest run, when it was interrupted and its window is still open. Read from the store,
// not remembered from start-up: a daemon killed after marking the run interrupted but before
// resuming it leaves the next daemon nothing to mark, and the run must still be resumed.
std::optional<std::int64_t> Daemon::RunToResume(double now) {
  Result<std::vector<store::RunRecord>> newest = store_->ListRecentRuns(1);
  if (!newest.ok() || newest->empty()) return std::nullopt;
  const store::RunRecord& run = newest->front();
  if (run.status != store::RunStatus::kInterrupted || run.deadline_at <= now) return std::nullopt;
  return run.id;
}

void Daemon::OnSignal(int signal) {
  if (signal == SIGHUP) {
    notifier_.Reloading();
    Result<DaemonConfig> reloaded = ParseDaemonConfigFile(config_path_);
    if (!reloaded.ok()) {
      Log(LogPriority::kError,
          "SIGHUP: keeping the current config: " + reloaded.status().message());
    } else {
      if (!state_dir_override_.empty()) {
        reloaded->state_dir = state_dir_override_;
        reloaded->socket_path = config_.socket_path;
      }
      reloaded->worker_path =
          reloaded->worker_path.empty() ? config_.worker_path : reloaded->worker_path;
      pending_config_ = *reloaded;
      Log(LogPriority::kNotice, "SIGHUP: config " + config_path_ + " reloaded" +
                                    (cycle_running_ ? "; it applies after the running cycle" : ""));
      if (!cycle_running_) wake_.cancel();
    }
    notifier_.Ready();
  } else {
    Log(LogPriority::kNotice,
        std::string(sigabbrev_np(signal)) + ": stopping" +
            (cycle_running_ ? " (the worker writes a checkpoint first)" : ""));
    stopping_ = true;
    notifier_.Stopping();
    supervisor_->Stop(WorkerExit::StoppedBy::kDaemonStop, config_.schedule.deadline_grace_seconds);
    wake_.cancel();
  }
  signals_.async_wait([this](const boost::system::error_code& ec, int next) {
    if (!ec) OnSignal(next);
  });
}

void Daemon::ApplyPendingReload() {
  if (!pending_config_) return;
  config_ = *pending_config_;
  pending_config_.reset();
}

void Daemon::Report(const CycleProgress& progress) {
  progress_ = progress;
  // Training reports every update; systemd needs no more than one status a second, a person
  // watching `--once` one line every 10 s.
  const double now = clock_.Now();
  const bool same_phase = progress.phase == last_phase_;
  if (same_phase && now - last_status_at_ < 1) return;
  const bool print = options_.once && (!same_phase || now - last_printed_at_ >= 10);
  last_status_at_ = now;
  last_phase_ = progress.phase;
  std::string status = progress.phase;
  if (progress.run_id) status += " run " + std::to_string(*progress.run_id);
  if (progress.phase == "training" && progress.updates > 0) {
    status += ": update " + std::to_string(progress.update) + "/" +
              std::to_string(progress.updates) + ", ETA " +
              std::to_string(static_cast<int>(progress.eta_seconds)) + " s, deadline " +
              FormatUtc(progress.deadline);
  }
  notifier_.Status(status);
  if (print && progress.phase != "idle") {
    last_printed_at_ = now;
    Log(LogPriority::kInfo, status, {progress.run_id, ""});
  }
}

void Daemon::ArmWatchdog() {
  std::optional<std::chrono::microseconds> interval = notifier_.WatchdogInterval();
  if (!interval) return;
  watchdog_.expires_after(*interval);
  watchdog_.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    notifier_.Watchdog();
    ArmWatchdog();
  });
}

asio::awaitable<int> Daemon::Main() {
  const StateLayout layout(config_.state_dir);
  if (Status s = layout.CreateDirectories(); !s.ok()) {
    Log(LogPriority::kError, s.message());
    co_return exit_code::kInternal;
  }
  Result<std::unique_ptr<store::Store>> store = store::Store::Open(config_.database_path());
  if (!store.ok()) {
    Log(LogPriority::kError, store.status().message());
    co_return exit_code::kInternal;
  }
  store_ = std::move(*store);
  // The training's update metrics are committed through a connection of their own, off the
  // loop (MetricWriter); the file is already open, checked and migrated.
  Result<std::unique_ptr<store::Store>> metric_store =
      store::Store::Open(config_.database_path(), {.check_integrity_on_open = false});
  if (!metric_store.ok()) {
    Log(LogPriority::kError, metric_store.status().message());
    co_return exit_code::kInternal;
  }
  metric_store_ = std::move(*metric_store);
  status_cache_ = std::make_unique<StoredStatusCache>(*store_);
  supervisor_ = std::make_unique<WorkerSupervisor>(io_, clock_, launcher_, layout.WorkerPidFile());
  if (Status s = Recover(); !s.ok()) {
    Log(LogPriority::kError, "recovery: " + s.message());
    co_return exit_code::kInternal;
  }
  metrics_ = std::make_unique<DaemonMetrics>(TrainerdVersion());
  RestoreMetrics();
  if (!config_.metrics_listen.empty()) {
    Result<std::unique_ptr<MetricsEndpoint>> endpoint =
        MetricsEndpoint::Start(config_.metrics_listen, *metrics_);
    if (!endpoint.ok()) {
      Log(LogPriority::kError, config_path_ + ": " + endpoint.status().message());
      co_return exit_code::kInternal;
    }
    metrics_endpoint_ = std::move(*endpoint);
    Log(LogPriority::kInfo, "metrics on http://" + config_.metrics_listen + "/metrics");
  }
  outcome_watch_ = std::make_unique<OutcomeWatch>(config_, *store_, files_, clock_, metrics_.get());
  CheckOutcomes();
  if (!options_.once) ArmOutcomeCheck();
  retention_ = std::make_unique<Retention>(config_, *store_, files_, clock_, metrics_.get());
  ApplyRetention();
  if (Status s = StartControlServer(); !s.ok()) {
    Log(LogPriority::kError, s.message());
    co_return exit_code::kInternal;
  }
  signals_.async_wait([this](const boost::system::error_code& ec, int signal) {
    if (!ec) OnSignal(signal);
  });
  ArmWatchdog();
  notifier_.Ready();

  NightlyCycle cycle(config_, *store_, *metric_store_, clock_, *supervisor_, files_, metrics_.get(),
                     [this](const CycleProgress& p) { Report(p); });
  int code = exit_code::kOk;
  while (!stopping_) {
    const double now = clock_.Now();
    std::optional<Window> window;
    std::string trigger;
    if (options_.once || run_now_) {
      window = WindowStartingAt(now, config_.schedule);
      trigger = run_now_ ? "run-now" : "once";
      run_now_ = false;
    } else if (std::optional<Window> open = WindowContaining(now, config_.schedule);
               open && CycleDue(*open)) {
      window = open;
      trigger = RunToResume(now) ? "resume" : now - open->start < 60 ? "schedule" : "catch-up";
    }
    if (!window) {
      const Window next = NextWindow(now, config_.schedule);
      notifier_.Status("idle; next cycle at " + FormatUtc(next.start));
      wake_.expires_after(TimerDelay(next.start - now));
      boost::system::error_code ec;
      auto token = asio::redirect_error(asio::use_awaitable, ec);  // no temporaries in co_await
      co_await wake_.async_wait(token);
      ApplyPendingReload();
      continue;
    }
    last_cycle_window_ = window->start;
    cycle_running_ = true;
    CycleOutcome outcome = co_await cycle.Run(*window, trigger, RunToResume(now));
    cycle_running_ = false;
    ApplyPendingReload();
    CheckOutcomes();
    ApplyRetention();
    if (options_.once) {
      code = stopping_          ? exit_code::kInterrupted
             : outcome.released ? exit_code::kOk
                                : exit_code::kCycleFailed;
      Log(outcome.released ? LogPriority::kNotice : LogPriority::kError, outcome.summary);
      break;
    }
  }
  if (stopping_ && !options_.once) code = exit_code::kOk;  // a service stop is not a failure
  watchdog_.cancel();
  outcome_timer_.cancel();
  signals_.cancel();
  control_.reset();
  store_.reset();  // closes the database cleanly
  co_return code;
}

}  // namespace trainerd::daemon
