#include "trainerd/daemon/daemon.h"

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <iterator>
#include <map>
#include <thread>

#include "trainerd/daemon/control_queries.h"
#include "trainerd/daemon/current_release.h"
#include "trainerd/daemon/duration_forecast.h"
#include "trainerd/daemon/event_log.h"
#include "trainerd/daemon/host_fingerprint.h"
#include "trainerd/daemon/instance_lock.h"
#include "trainerd/daemon/log.h"
#include "trainerd/daemon/policy.h"
#include "trainerd/daemon/release_folders.h"
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

int RunMain(asio::io_context& io, asio::awaitable<int> main) {
  int code = exit_code::kInternal;
  asio::co_spawn(io, std::move(main), [&](std::exception_ptr error, int result) {
    code = result;
    if (!error) return;
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      Log(LogPriority::kError, std::string("internal error: ") + e.what() + "; stopping");
    } catch (...) {
      Log(LogPriority::kError, "internal error: an unknown exception; stopping");
    }
    code = exit_code::kInternal;
    io.stop();
  });
  io.run();
  return code;
}

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
  // A publish killed before its record left a staging folder or an unrecorded one.
  Result<std::vector<std::string>> orphans =
      CollectReleaseOrphans(*store_, files_, config_.state_dir);
  if (!orphans.ok()) return orphans.status();
  if (!orphans->empty()) {
    RecordAndLog(*store_, {0, clock_.Now(), std::nullopt, "release_orphans_removed",
                           store::Severity::kWarning,
                           std::to_string(orphans->size()) +
                               " release folders no release names (a publish cut off) removed",
                           nlohmann::json{{"paths", *orphans}}.dump()});
  }
  // releases/current follows the record: a switch killed between the two is finished here.
  if (Status s = SyncCurrentReleaseLink(*store_, files_, config_.state_dir); !s.ok()) {
    RecordAndLog(*store_,
                 {0, clock_.Now(), std::nullopt, "release_link_failed", store::Severity::kError,
                  "releases/current does not name the current release: " + s.message(), "{}"});
  }
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
  if (const std::vector<PlanTiming> last = RecordedPlanTimings(*store_, nullptr, 1);
      !last.empty()) {
    metrics_->PlanTrained(last.front().PlanError());
  }
  Result<std::vector<store::RunRecord>> success =
      store_->ListRunsByStatus(store::RunStatus::kSucceeded, 1);
  if (success.ok() && !success->empty() && success->front().ended_at) {
    metrics_->LastSuccess(*success->front().ended_at);
  }
}

Status Daemon::StartControlServer() {
  Result<ControlGroupIds> groups = ResolveControlGroups(config_);
  if (!groups.ok()) return groups.status();
  ControlAccess access;
  access.operate_group = groups->operate;
  access.read_group = groups->read;
  access.worker = [this] { return supervisor_->running_pid(); };
  Result<std::unique_ptr<ControlServer>> server =
      ControlServer::Start(io_, config_.socket_path, access,
                           [this](const nlohmann::json& request, const ControlPeer& peer) {
                             return HandleControl(request, peer);
                           });
  if (!server.ok()) return server.status();
  control_ = std::move(*server);
  return Status::Ok();
}

nlohmann::json Daemon::HandleControl(const nlohmann::json& request, const ControlPeer& peer) {
  const std::string command = request["command"];
  // What may change something (RequiredRole) among the commands served here: an unknown
  // command is refused below, unrecorded.
  const bool known =
      OperatorCommands::Handles(command) || command == "run-now" || command == "cancel";
  if (known && RequiredRole(request) == ControlRole::kOperate) {
    // Who steered the daemon, before it acts: a withdrawal or rollback names its operator.
    nlohmann::json action;  // release's pin, unpin or show; nothing longer is recorded
    if (request.contains("action") && request["action"].is_string() &&
        request["action"].get_ref<const std::string&>().size() <= 16) {
      action = request["action"];
    }
    RecordAndLog(
        *store_,
        {0, clock_.Now(), std::nullopt, "control_request", store::Severity::kInfo,
         "uid " + std::to_string(peer.uid) + " (pid " + std::to_string(peer.pid) + ") sent '" +
             command + "'",
         nlohmann::json{
             {"command", command}, {"action", action}, {"uid", peer.uid}, {"pid", peer.pid}}
             .dump()});
  }
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
  if (OperatorCommands::Handles(command)) {
    nlohmann::json answer = operator_commands_->Handle(request);
    // Outcomes judged now, or after the cycle, which may be releasing.
    if (command == "outcome" && answer.value("ok", false) && !cycle_running_) CheckOutcomes();
    return answer;
  }
  return Error(kBadRequest, "unknown command '" + command + "'");
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
  Result<InstanceLock> lock = InstanceLock::Acquire(layout.LockFile());
  if (!lock.ok()) {
    Log(LogPriority::kError, lock.status().message());
    co_return exit_code::kInternal;
  }
  lock_.emplace(std::move(lock).value());
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
  operator_commands_ = std::make_unique<OperatorCommands>(config_, *store_, files_, clock_,
                                                          metrics_.get(), *outcome_watch_);
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
  operator_commands_.reset();
  store_.reset();  // closes the database cleanly
  co_return code;
}

}  // namespace trainerd::daemon
