// One nightly cycle (docs/daemon.md): resolve the config version, then attempts until one
// ends the cycle: plan (reuse the last validated plan, the job's own plan, or the planner),
// measure the ledger, refuse a plan over the usable budget or (not yet validated) failing
// the parity check, train in a trainer-run child under the window's deadline, record the
// run, and on success run the regression check and the release gate; on an OOM, a crash, a
// leak or a refused plan, ask the policy (policy.h) for the fallback and retry within the
// window.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "trainerd/daemon/asio.h"
#include "trainerd/daemon/clock.h"
#include "trainerd/daemon/daemon_config.h"
#include "trainerd/daemon/daemon_metrics.h"
#include "trainerd/daemon/file_store.h"
#include "trainerd/daemon/metric_writer.h"
#include "trainerd/daemon/policy.h"
#include "trainerd/daemon/schedule.h"
#include "trainerd/daemon/worker_report.h"
#include "trainerd/daemon/worker_supervisor.h"
#include "trainerd/store/store.h"
#include "trainerd/trainer/spec/job_spec.h"

namespace trainerd::daemon {

struct CycleOutcome {
  // The cycle's last run succeeded: inside its window, no regression, through the gate.
  bool succeeded = false;
  bool released = false;              // its model became the current release
  std::vector<std::int64_t> run_ids;  // every run of the cycle, in order
  std::string summary;                // one line for logs
};

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

class NightlyCycle {
 public:
  // Everything referenced must outlive the cycle; `metrics` may be null. `metric_store` is a
  // second connection to the run store, for the training's update metrics (MetricWriter).
  NightlyCycle(const DaemonConfig& config, store::Store& store, store::Store& metric_store,
               const Clock& clock, WorkerSupervisor& supervisor, FileStore& files,
               DaemonMetrics* metrics, std::function<void(const CycleProgress&)> on_progress);

  // Runs the cycle of `window`. `trigger` says why ("schedule", "catch-up", "once",
  // "resume"); `resumes_run` is a run the cycle continues (interrupted by a daemon restart),
  // recorded as the first run's fallback_of.
  asio::awaitable<CycleOutcome> Run(Window window, std::string trigger,
                                    std::optional<std::int64_t> resumes_run);

 private:
  struct AttemptResult;
  struct WorkerReportOutput;
  struct Training;
  struct Ledger;
  struct Refusal;

  // One run: record it, plan, store the plan, measure the ledger, check the plan, train,
  // then judge it.
  asio::awaitable<AttemptResult> RunAttempt(const ActiveConfig& active, Attempt& attempt,
                                            std::optional<std::int64_t> fallback_of);
  // Creates the run record (no plan yet) and marks it running; false when the store refuses.
  bool BeginRun(const ActiveConfig& active, const Attempt& attempt,
                std::optional<std::int64_t> fallback_of, store::RunRecord& run,
                AttemptResult& result);
  // The run's plan is chosen: into the record, the store and the worker's plan file.
  Status AdoptPlan(const store::RunPlan& plan, const std::string& plan_path, store::RunRecord& run);
  void FinishAttempt(store::RunRecord& run, AttemptResult& result, AttemptOutcome outcome,
                     const std::string& message, std::vector<store::UpdateMetric> metrics,
                     const std::vector<store::SliceEval>& evals, bool regressed = false);
  // The checks between the ledger and training: a plan whose measured ledger peak exceeds
  // the usable budget is refused (event plan_over_budget); then a plan not yet validated
  // for this config version and hardware runs the parity check (event parity). Empty when
  // the plan may train; else why not, with the attempt's outcome (kRejected, or how the
  // check itself ended). Sets run.parity_seconds when a check ran.
  asio::awaitable<std::optional<Refusal>> CheckPlanBeforeTraining(const ActiveConfig& active,
                                                                  const Attempt& attempt,
                                                                  const std::string& plan_path,
                                                                  const Ledger& ledger,
                                                                  store::RunRecord& run);
  // kRejected when the ledger was measured and its peak exceeds the usable bytes.
  std::optional<Refusal> RefuseOverBudget(const Attempt& attempt, const Ledger& ledger,
                                          std::int64_t run_id);
  // trainer-run --parity on the plan file, unless the plan is validated or the check is
  // disabled (parity.updates: 0).
  asio::awaitable<std::optional<Refusal>> CheckParity(const ActiveConfig& active,
                                                      const Attempt& attempt,
                                                      const std::string& plan_path,
                                                      store::RunRecord& run);
  // The first run of a plan (one not yet validated) profiles kProfileUpdates of its updates
  // (trainer-run --profile, CPU jobs) and stores the summary as a "profile" event, its Chrome
  // trace in profiles/run-<id>.trace.json; a failure is a warning, never the run's.
  asio::awaitable<void> ProfileNewPlan(const ActiveConfig& active, const Attempt& attempt,
                                       const std::string& plan_path, std::int64_t run_id);
  // The attempt's plan has succeeded for its config version on this hardware before: its
  // source is kValidated, or it equals the store's last validated plan.
  bool IsValidated(const Attempt& attempt);
  // The training worker under the window's limits, its events stored as they arrive.
  asio::awaitable<Training> Train(const ActiveConfig& active, const std::string& plan_path,
                                  std::int64_t run_id);
  // Software, shapes, seeds, data, throughput, peak and cost from the worker's events.
  void FillFromReport(const ActiveConfig& active, const WorkerReport& report,
                      store::RunRecord& run) const;
  static std::string DescribeFailure(const Training& training);
  // A finished training: the regression check and the release gate decide its status, its
  // model is published, and its config version's state follows.
  void JudgeAndRelease(const ActiveConfig& active, WorkerReport& report, store::RunRecord& run,
                       AttemptResult& result);
  // The run's final eval against the current release's: the release evaluated by this run
  // before training when the run `started_from_it` (init_from: current_release), else the
  // release's own final eval.
  GateVerdict GateAgainstCurrentRelease(const WorkerReport& report, bool started_from_it);
  // Publishes the model (current only through the gate, then releases/current points at
  // it); true when it became current.
  bool PublishModel(const nlohmann::json& fin, const GateVerdict& gate, bool regressed,
                    const store::RunRecord& run);
  // The worker's model files copied into the release folder `dir`: model.pt (verified
  // against model_sha256) and, when the worker wrote them, model.safetensors (verified) and
  // model.json with the release's identity added. Returns model.pt's hash.
  Result<std::string> CopyReleaseFiles(const nlohmann::json& fin, const store::RunRecord& run,
                                       bool released, const std::string& dir);
  void UpdateConfigState(const ActiveConfig& active, const store::RunRecord& run, bool regressed,
                         const std::string& message);
  asio::awaitable<Result<std::optional<store::RunPlan>>> Plan(const ActiveConfig& active,
                                                              Attempt& attempt,
                                                              std::int64_t run_id);
  // Runs a report-printing worker mode (--plan-only, --ledger, --parity, --device-info):
  // `extra_args` after the common ones, its stderr to `log_path`; its one JSON object or its
  // error event.
  asio::awaitable<WorkerReportOutput> RunReportMode(const ActiveConfig& active,
                                                    const std::vector<std::string>& extra_args,
                                                    const std::string& log_path);
  // The fingerprint runs of `active` are recorded and looked up under: the host's, with a
  // GPU's name and memory from the worker (--device-info) when the job trains on one.
  asio::awaitable<store::HardwareFingerprint> DescribeHardware(const ActiveConfig& active);
  // trainer-run --ledger at the plan file (event ledger, or ledger_failed).
  asio::awaitable<Ledger> MeasureLedger(const ActiveConfig& active, const std::string& plan_path,
                                        std::int64_t run_id);
  Result<ActiveConfig> ResolveConfig();
  Result<ActiveConfig> LoadVersion(const std::string& hash);
  std::vector<std::string> WorkerArgs(const ActiveConfig& active) const;
  // The blocks a plan of `spec` may checkpoint: the built-in models' from the spec, the team's
  // own model's as a ledger of `config_hash` counted them this cycle (0 before one did).
  int BlocksOf(const JobSpec& spec, const std::string& config_hash) const;
  WorkerSupervisor::Limits Limits() const;
  void Record(std::optional<std::int64_t> run_id, const std::string& kind, store::Severity severity,
              const std::string& message, const std::string& details_json = "{}");
  void Progress(const std::string& phase, std::optional<std::int64_t> run_id = std::nullopt);
  // (Re)writes the report page of each run of the cycle (reports/run-<id>.html), once the
  // cycle's chain of attempts is complete; a failure is a warning event, never the cycle's.
  void WriteReports(const std::vector<std::int64_t>& run_ids);

  const DaemonConfig& config_;
  store::Store& store_;
  MetricWriter metric_writer_;
  const Clock& clock_;
  WorkerSupervisor& supervisor_;
  FileStore& files_;
  DaemonMetrics* metrics_;
  std::function<void(const CycleProgress&)> on_progress_;
  store::HardwareFingerprint hardware_;
  Window window_;
  CycleProgress progress_;
  // Blocks of the team's own model (torchscript, plugin) by config hash, as the worker's
  // ledger counted them: the daemon cannot load the model, and the named baseline plan
  // checkpoints every block.
  std::map<std::string, int> counted_blocks_;
};

}  // namespace trainerd::daemon
