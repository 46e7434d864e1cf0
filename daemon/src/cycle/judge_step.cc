// Judging a finished training: its throughput against the last succeeded run on this
// hardware with the same shapes, and its final eval against the current release's (the
// release gate). Either regressing makes the run regressed: it keeps its model out of
// releases/current and, for a candidate config, rolls the config back.
#include "cycle/cycle_steps.h"

namespace trainerd::daemon {
namespace {

class JudgeStep : public CycleStep {
 public:
  const char* name() const override { return "judge"; }

  asio::awaitable<void> Run(CycleState& state, CycleContext& context) override {
    AttemptState& a = state.current;
    Result<std::optional<store::RunRecord>> baseline =
        context.store().LastSucceededRun(state.hardware);
    const ThroughputVerdict throughput =
        CheckThroughput(a.run.samples_per_second, baseline.ok() ? *baseline : std::nullopt,
                        a.run.shapes_json, context.config().regression.throughput_tolerance);
    context.Record(a.run.id, throughput.regressed ? "throughput_regressed" : "throughput_check",
                   throughput.regressed ? store::Severity::kError : store::Severity::kInfo,
                   throughput.reason);
    RecordPlanTiming(state, context);
    a.gate = GateAgainstCurrentRelease(a.training.report, a.run.data_fingerprint,
                                       state.active->spec.init_from.current_release, context);
    context.Record(a.run.id, a.gate.pass ? "gate_passed" : "gate_failed",
                   a.gate.pass ? store::Severity::kInfo : store::Severity::kError, a.gate.reason,
                   a.gate.ToJson());
    const bool regressed = throughput.regressed || !a.gate.pass;
    a.end = AttemptEnd{AttemptOutcome::kSucceeded,
                       throughput.regressed ? throughput.reason
                       : regressed          ? a.gate.reason
                                            : "finished inside the window",
                       regressed};
    co_return;
  }

 private:
  // Where the plan came from the planner: its update against training's, for the next
  // nights' duration (duration_forecast.h) and the dashboard.
  static void RecordPlanTiming(CycleState& state, CycleContext& context) {
    AttemptState& a = state.current;
    if (!a.plan_timing || a.plan_timing->planned_update_seconds <= 0 || !a.run.samples_per_second ||
        *a.run.samples_per_second <= 0) {
      return;
    }
    PlanTiming& t = *a.plan_timing;
    t.trained_update_seconds =
        state.active->spec.training.effective_batch / *a.run.samples_per_second;
    context.Record(a.run.id, kPlanTimingEvent, store::Severity::kInfo, t.Describe(), t.ToJson());
    if (context.metrics()) context.metrics()->PlanTrained(t.PlanError());
  }

  // The run's final eval against the current release's: the release evaluated by this run
  // before training when the run `started_from_it` (init_from: current_release), else the
  // release's own final eval, on the same held-out windows when its data had this run's
  // fingerprint.
  static GateVerdict GateAgainstCurrentRelease(const WorkerReport& report,
                                               const std::string& data_fingerprint,
                                               bool started_from_it, CycleContext& context) {
    std::optional<SliceEvals> reference;
    std::optional<std::int64_t> reference_run;
    bool on_this_data = false;
    bool same_windows = false;
    store::Store& store = context.store();
    if (Result<std::optional<store::Release>> current = store.CurrentRelease();
        current.ok() && *current) {
      reference_run = (*current)->run_id;
      if (started_from_it && !report.initial_evals().empty()) {
        // The run started from the current release (init_from): its initial eval is that
        // release on this run's held-out data, whatever data the release was trained on.
        reference = report.initial_evals();
        on_this_data = true;
        same_windows = true;
      } else if (Result<std::vector<store::SliceEval>> stored = store.GetSliceEvals(*reference_run);
                 stored.ok()) {
        reference = FinalSliceEvals(*stored);
        const Result<store::RunRecord> run = store.GetRun(*reference_run);
        same_windows =
            run.ok() && !data_fingerprint.empty() && run->data_fingerprint == data_fingerprint;
      }
    }
    GateVerdict gate = ReleaseGate(FinalSliceEvals(report.evals()), reference, reference_run,
                                   same_windows, context.config().regression);
    if (on_this_data) gate.reason += ", evaluated on this run's held-out data before training";
    gate.reference_evaluated_here = on_this_data;
    return gate;
  }
};

}  // namespace

std::unique_ptr<CycleStep> MakeJudgeStep() { return std::make_unique<JudgeStep>(); }

}  // namespace trainerd::daemon
