// Training: the worker (under its launcher for a data-parallel job) under the window's
// deadline, its events stored as they arrive, its update metrics committed in batches off the
// event loop (MetricWriter); then the run record filled from what it reported. An OOM, crash,
// leak or stop ends the attempt as such.
#include <cstdlib>
#include <filesystem>

#include "cycle/cycle_steps.h"
#include "trainerd/daemon/current_release.h"
#include "trainerd/daemon/event_log.h"
#include "trainerd/daemon/host_fingerprint.h"
#include "trainerd/daemon/rank_launch.h"
#include "trainerd/daemon/state_layout.h"

namespace trainerd::daemon {
namespace {

// Metrics are stored in batches of this many updates while a run trains.
constexpr std::size_t kMetricBatch = 20;

class TrainStep : public CycleStep {
 public:
  const char* name() const override { return "train"; }

  asio::awaitable<void> Run(CycleState& state, CycleContext& context) override {
    AttemptState& a = state.current;
    co_await Train(state, context);
    Training& training = a.training;
    if (!training.process.ok()) {
      a.end = AttemptEnd{AttemptOutcome::kCrashed, training.process.status().message()};
      co_return;
    }
    FillFromReport(state, context);
    if (training.outcome == AttemptOutcome::kSucceeded) co_return;
    const std::string message = DescribeFailure(training);
    context.Record(a.run.id, "run_" + std::string(ToString(training.outcome)),
                   training.outcome == AttemptOutcome::kDeadline ||
                           training.outcome == AttemptOutcome::kInterrupted
                       ? store::Severity::kWarning
                       : store::Severity::kError,
                   message);
    a.end = AttemptEnd{training.outcome, message};
  }

 private:
  static asio::awaitable<void> Train(CycleState& state, CycleContext& context) {
    AttemptState& a = state.current;
    const ActiveConfig& active = *state.active;
    const std::int64_t run_id = a.run.id;
    const DaemonConfig& config = context.config();
    const StateLayout layout(config.state_dir);
    context.Progress("training", run_id);
    std::vector<std::string> argv = context.WorkerArgs(active);
    argv.insert(argv.end(), {"--plan", a.plan_path, "--output-dir", layout.WorkDir(),
                             "--resume-if-compatible"});
    if (active.spec.init_from.current_release && !CurrentReleaseWeights(config.state_dir)) {
      context.Record(run_id, "init_from_none", store::Severity::kInfo,
                     "init_from: current_release: no current release with weights yet, so the "
                     "model starts from the weights its job gives it (a Hugging Face folder's "
                     "or a TorchScript export's own, otherwise its random initialisation)");
    }
    Training& training = a.training;
    WorkerReport& report = training.report;
    const std::optional<std::int64_t> ooms_before = CgroupOomKillCount();
    bool warned_late = false;
    std::function<void(const std::string&)> on_line = [&](const std::string& line) {
      report.Consume(line, context.clock().Now());
      for (store::Event& e : report.TakeEvents()) {
        e.run_id = run_id;
        RecordAndLog(context.store(), e);
      }
      if (report.pending_metrics() >= kMetricBatch) {
        context.metric_writer().Append(run_id, report.TakeMetrics());
      }
      CycleProgress& progress = context.progress();
      progress.update = report.updates_done();
      progress.updates = report.updates();
      progress.eta_seconds = report.eta_seconds();
      const double now = context.clock().Now();
      if (context.metrics()) {
        context.metrics()->Progress(state.window.deadline, now + report.eta_seconds());
      }
      if (!warned_late && report.updates_done() > 2 &&
          now + report.eta_seconds() > state.window.deadline) {
        warned_late = true;
        context.Record(run_id, "eta_beyond_deadline", store::Severity::kWarning,
                       Format("the worker's ETA is %.0f s but %.0f s are left before the deadline",
                              report.eta_seconds(), state.window.deadline - now));
      }
      context.Progress("training", run_id);
    };
    // A data-parallel job's ranks start under its launcher, which the supervisor signals.
    const char* search_path = std::getenv("PATH");
    Result<std::vector<std::string>> command = RankLaunchCommand(
        active.spec.distributed,
        (std::filesystem::path(config.worker_path).parent_path() / "trainer-launch").string(), argv,
        search_path != nullptr ? search_path : "/usr/bin:/bin");
    if (!command.ok()) {
      training.process = command.status();
      co_return;
    }
    const LaunchSpec launch{*command, layout.RunLog(run_id)};
    const WorkerSupervisor::Limits limits = context.Limits(state.window);
    training.process = co_await context.supervisor().Run(launch, limits, on_line);
    context.RecordIfFailed(run_id, context.metric_writer().Drain());
    if (!training.process.ok()) co_return;
    training.exit =
        ExitOf(*training.process, report.error(), ooms_before, context.supervisor().stopped_by());
    training.exit.saw_finish = report.finish().has_value();
    training.outcome = ClassifyExit(training.exit);
  }

  // Software, shapes, seeds, data, throughput, peak and cost from the worker's events.
  static void FillFromReport(CycleState& state, CycleContext& context) {
    store::RunRecord& run = state.current.run;
    const WorkerReport& report = state.current.training.report;
    if (const std::optional<StartEvent>& start = report.start()) {
      run.software.libtorch_version = start->software.torch_version;
      run.software.blas = start->software.blas;
      run.software.compiler = start->software.compiler;
      run.shapes_json = nlohmann::json{{"model", ToJson(start->model)},
                                       {"effective_batch", start->effective_batch}}
                            .dump();
      run.seeds_json = nlohmann::json{{"training", start->seed}}.dump();
      run.data_fingerprint = start->data.fingerprint;
    }
    const std::optional<FinishEvent>& fin = report.finish();
    if (!fin) return;
    run.throughput_method = fin->throughput_method;
    // None (a worker that resumed at the job's last update trained nothing) stays empty.
    run.samples_per_second = fin->samples_per_second;
    run.tokens_per_second = fin->tokens_per_second;
    run.mfu = fin->mfu;
    run.final_loss = fin->final_train_loss;
    if (!run.peak_memory) run.peak_memory = store::MemoryByCategory{};
    run.peak_memory->peak = fin->peak_bytes;
    const int resumed_from = report.start() ? report.start()->resumed_from_update : 0;
    const double samples = static_cast<double>(fin->updates - resumed_from) *
                           state.active->spec.training.effective_batch;
    // Every rank holds a device for the run's duration.
    const double device_hours = fin->elapsed_seconds / 3600 * run.world_size;
    if (samples > 0) {
      run.cost_per_sample = context.config().cost.per_device_hour * device_hours / samples;
    }
  }

  static std::string DescribeFailure(const Training& training) {
    const WorkerReport& report = training.report;
    std::string message = training.exit.stopped_by != WorkerExit::StoppedBy::kNobody
                              ? "stopped (" + std::string(ToString(training.outcome)) +
                                    "), worker " + training.process->Describe()
                              : "worker " + training.process->Describe();
    if (report.error()) message += ": " + report.error()->message;
    if (report.last_checkpoint_update()) {
      message += "; checkpoint at update " + std::to_string(*report.last_checkpoint_update());
    }
    return message;
  }
};

}  // namespace

std::unique_ptr<CycleStep> MakeTrainStep() { return std::make_unique<TrainStep>(); }

}  // namespace trainerd::daemon
