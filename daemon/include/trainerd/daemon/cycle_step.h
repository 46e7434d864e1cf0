// The nightly cycle's steps (docs/daemon.md, "The cycle"): each a class in its own file under
// daemon/src/cycle/, implementing one small interface. The cycle resolves the config version,
// then runs attempts, each a fresh run record taken through the attempt steps in order (data,
// plan, ledger, parity, profile, train, judge, release) until one ends it; after a failed attempt
// it applies the fallback decision (policy.h) and tries again; at the end it writes the runs'
// report pages. A step reads and writes the cycle's state and reaches the daemon's services
// (store, clock, worker supervisor, files, metrics) through CycleContext. A step added to the
// list (a test does) runs in the cycle like the others (docs/extending.md).
// Everything runs on the daemon's one io_context thread; nothing here is thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "trainerd/daemon/asio.h"
#include "trainerd/daemon/clock.h"
#include "trainerd/daemon/daemon_config.h"
#include "trainerd/daemon/daemon_metrics.h"
#include "trainerd/daemon/data_quality.h"
#include "trainerd/daemon/duration_forecast.h"
#include "trainerd/daemon/file_store.h"
#include "trainerd/daemon/metric_writer.h"
#include "trainerd/daemon/policy.h"
#include "trainerd/daemon/schedule.h"
#include "trainerd/daemon/worker_report.h"
#include "trainerd/daemon/worker_supervisor.h"
#include "trainerd/store/store.h"
#include "trainerd/trainer/spec/job_spec.h"

namespace trainerd::daemon {

// Where the cycle is, for sd_notify STATUS= and the control socket.
struct CycleProgress {
  // "resolving config", "planning", "measuring ledger", "checking parity", "training", ...
  std::string phase;
  std::optional<std::int64_t> run_id;
  int update = 0;
  int updates = 0;
  double eta_seconds = 0;
  double deadline = 0;  // Unix seconds
};

// A config version as the cycle runs it.
struct ActiveConfig {
  store::ConfigVersion version;
  JobSpec spec;
  std::string worker_config_path;  // the version's exact text, where the worker reads it
};

// The training worker's run: its process, what it reported, and how it ended.
struct Training {
  Result<ProcessExit> process = Status::Internal("not run");
  WorkerReport report;
  WorkerExit exit;
  AttemptOutcome outcome = AttemptOutcome::kCrashed;
};

// The measured ledger of the attempt's plan, when it could be measured.
struct LedgerFigures {
  std::optional<store::MemoryByCategory> memory;
  std::int64_t usable_bytes = 0;  // what the peak is measured against
};

// How an attempt ended: set by the step that ends it.
struct AttemptEnd {
  AttemptOutcome outcome = AttemptOutcome::kCrashed;
  std::string message;     // the run's one line
  bool regressed = false;  // finished, but judged regressed (throughput or release gate)
};

// One attempt: a run record and what its steps found.
struct AttemptState {
  Attempt attempt;
  store::RunRecord run;
  std::string plan_path;  // the worker's --plan file
  LedgerFigures ledger;
  Training training;
  GateVerdict gate;
  // The planner's seconds per update, when the plan came from it (the plan step); training's
  // (the judge step, which records them).
  std::optional<PlanTiming> plan_timing;
  bool released = false;
  // Set by the step that decides how the attempt ends. An end other than kSucceeded stops the
  // attempt's steps; a succeeded one (the judge's) lets the rest run (the release).
  std::optional<AttemptEnd> end;
  bool finished = false;  // the run's end is recorded (FinishAttempt)
};

struct CycleState {
  Window window;
  std::string trigger;  // "schedule", "catch-up", "once", "resume"
  std::optional<std::int64_t> resumes_run;
  std::optional<ActiveConfig> active;  // set by the resolve step
  std::string failure;                 // or why the cycle ends before any attempt
  store::HardwareFingerprint hardware;
  store::SoftwareFingerprint software;  // the worker's trainer and LibTorch (resolve step)
  AttemptState current;                 // the attempt running now
  // The input-quality check of each config version's data, once per cycle (the data step).
  std::map<std::string, DataQualityFigures> data_quality;
  std::vector<std::int64_t> run_ids;  // every run of the cycle, in order
};

// The daemon's services as the steps use them.
class CycleContext {
 public:
  // Everything referenced must outlive the context; `metrics` may be null.
  CycleContext(const DaemonConfig& config, store::Store& store, store::Store& metric_store,
               const Clock& clock, WorkerSupervisor& supervisor, FileStore& files,
               DaemonMetrics* metrics, std::function<void(const CycleProgress&)> on_progress);

  const DaemonConfig& config() const { return config_; }
  store::Store& store() { return store_; }
  MetricWriter& metric_writer() { return metric_writer_; }
  const Clock& clock() const { return clock_; }
  WorkerSupervisor& supervisor() { return supervisor_; }
  FileStore& files() { return files_; }
  DaemonMetrics* metrics() { return metrics_; }
  CycleProgress& progress() { return progress_; }

  // Stores an event (and logs it) at the clock's now.
  void Record(std::optional<std::int64_t> run_id, const std::string& kind, store::Severity severity,
              const std::string& message, const std::string& details_json = "{}");
  // A failed store write that rollback or the record depends on: an error event, never lost.
  void RecordIfFailed(std::optional<std::int64_t> run_id, const Status& status);
  // Announces the cycle's phase (sd_notify, the control socket).
  void Progress(const std::string& phase, std::optional<std::int64_t> run_id = std::nullopt);
  // The worker's limits: SIGTERM at the deadline less the grace period, SIGKILL at it.
  WorkerSupervisor::Limits Limits(const Window& window) const;

  // The worker command line of `active` (config, base dir, --json, --init-from).
  std::vector<std::string> WorkerArgs(const ActiveConfig& active) const;
  // What a report-printing worker mode (--plan-only, --ledger, --parity, --profile,
  // --device-info) printed: its exit, its one report object, its error event.
  struct ReportRun {
    Result<ProcessExit> exit = Status::Internal("not run");
    nlohmann::json report;             // the report object as printed (stored as details)
    std::optional<ErrorEvent> error;   // its error event, if any
    bool ok() const;                   // exited 0 with a report
    std::string ErrorMessage() const;  // the error event's message, or the exit described
  };
  asio::awaitable<ReportRun> RunReportMode(const ActiveConfig& active, const Window& window,
                                           const std::vector<std::string>& mode_args,
                                           const std::string& log_path);

  // Blocks of the team's own model (torchscript, plugin) by config hash, as the worker's
  // ledger counted them: the daemon cannot load the model, and the named baseline plan
  // checkpoints every block.
  std::map<std::string, int>& counted_blocks() { return counted_blocks_; }
  // The blocks a plan of `spec` may checkpoint: declared by its keys, or counted this cycle.
  int BlocksOf(const JobSpec& spec, const std::string& config_hash) const;

 private:
  const DaemonConfig& config_;
  store::Store& store_;
  MetricWriter metric_writer_;
  const Clock& clock_;
  WorkerSupervisor& supervisor_;
  FileStore& files_;
  DaemonMetrics* metrics_;
  std::function<void(const CycleProgress&)> on_progress_;
  CycleProgress progress_;
  std::map<std::string, int> counted_blocks_;
};

class CycleStep {
 public:
  virtual ~CycleStep() = default;
  // The step's name: resolve, data, plan, ledger, parity, profile, train, judge, release,
  // report.
  virtual const char* name() const = 0;
  // Runs the step. An attempt step ends its attempt by setting state.current.end (or through
  // FinishAttempt); the resolve step ends the cycle by setting state.failure.
  virtual asio::awaitable<void> Run(CycleState& state, CycleContext& context) = 0;
};

using CycleSteps = std::vector<std::unique_ptr<CycleStep>>;

// The attempt steps in order: data, plan, ledger, parity, profile, train, judge, release.
CycleSteps DefaultAttemptSteps();

}  // namespace trainerd::daemon
