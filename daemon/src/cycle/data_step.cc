// The input-quality check, the attempt's first step (docs/data-quality.md): the worker
// profiles the night's training data (trainer-run --data-profile: cached with the files'
// digests, so it costs a pass only when the data changed), the profile is kept under the
// data's fingerprint, and compared with the profile of the current release's data. Every
// attempt of a cycle that runs one config version trains the same data: it is profiled once.
// A breach, or data the worker cannot read, ends the attempt as `data_quality`: no plan
// would fix it, and a failed night is better than a model trained on a broken export.
#include "cycle/cycle_steps.h"
#include "trainerd/daemon/data_quality.h"
#include "trainerd/daemon/state_layout.h"
#include "trainerd/trainer/spec/worker_protocol.h"

namespace trainerd::daemon {
namespace {

class DataStep : public CycleStep {
 public:
  const char* name() const override { return "data"; }

  asio::awaitable<void> Run(CycleState& state, CycleContext& context) override {
    AttemptState& a = state.current;
    if (!context.config().data_quality.check) co_return;
    const std::string& config_hash = state.active->version.hash;
    auto checked = state.data_quality.find(config_hash);
    if (checked == state.data_quality.end()) {
      std::optional<DataQualityFigures> figures = co_await Check(state, context);
      if (!figures) co_return;  // the attempt ended
      checked = state.data_quality.emplace(config_hash, *std::move(figures)).first;
    }
    const DataQualityFigures& figures = checked->second;
    a.run.data_fingerprint = figures.data_fingerprint;
    a.run.data_quality_json = figures.ToJson().dump();  // the metrics read it when the run ends
    context.RecordIfFailed(a.run.id,
                           context.store().SetRunDataQuality(a.run.id, a.run.data_quality_json));
    const std::string message = "input quality: " + figures.Summary();
    context.Record(a.run.id, figures.pass() ? "data_quality" : "data_quality_breach",
                   figures.pass() ? store::Severity::kInfo : store::Severity::kError, message,
                   a.run.data_quality_json);
    if (!figures.pass()) {
      a.end = AttemptEnd{AttemptOutcome::kDataQuality,
                         "stopped before training: the night's data failed its quality check: " +
                             figures.Summary()};
    }
  }

 private:
  // Profiles the night's data, keeps the profile and compares it with the current release's.
  // A worker that could not profile it ends the attempt: as `data_quality` when it could not
  // read the data, else as the daemon stopped it, an OOM or a crash.
  static asio::awaitable<std::optional<DataQualityFigures>> Check(CycleState& state,
                                                                  CycleContext& context) {
    AttemptState& a = state.current;
    context.Progress("checking input quality", a.run.id);
    const StateLayout layout(context.config().state_dir);
    const std::vector<std::string> args = {"--data-profile"};
    const CycleContext::ReportRun out =
        co_await context.RunReportMode(*state.active, state.window, args, layout.RunLog(a.run.id));
    if (!out.ok()) {
      WorkerExit stopped;
      stopped.stopped_by = context.supervisor().stopped_by();
      const bool unreadable = out.error && out.error->kind == "data";
      const bool oom = out.exit.ok() && out.exit->exited && out.exit->code == 4;
      const AttemptOutcome outcome = stopped.stopped_by != WorkerExit::StoppedBy::kNobody
                                         ? ClassifyExit(stopped)
                                     : unreadable ? AttemptOutcome::kDataQuality
                                     : oom        ? AttemptOutcome::kOom
                                                  : AttemptOutcome::kCrashed;
      const std::string message = "the night's data could not be profiled: " + out.ErrorMessage();
      context.Record(a.run.id, unreadable ? "data_unreadable" : "data_profile_failed",
                     store::Severity::kError, message,
                     out.error ? ToJson(WorkerEvent(*out.error)).dump() : "{}");
      a.end = AttemptEnd{outcome, message};
      co_return std::nullopt;
    }
    const DataProfileReport tonight = Parse<DataProfileReport>(out.report);
    // Kept for the nights to come: their reference while this data's release is current.
    context.RecordIfFailed(
        a.run.id, context.files().WriteAtomically(layout.DataProfile(tonight.data_fingerprint),
                                                  out.report.dump()));
    std::optional<DataProfileReport> reference;
    std::optional<std::int64_t> reference_run;
    if (Result<std::optional<store::Release>> current = context.store().CurrentRelease();
        current.ok() && *current) {
      reference_run = (*current)->run_id;
      Result<store::RunRecord> run = context.store().GetRun(*reference_run);
      if (run.ok() && !run->data_fingerprint.empty()) {
        Result<std::string> text = context.files().Read(layout.DataProfile(run->data_fingerprint));
        const nlohmann::json json =
            text.ok() ? nlohmann::json::parse(*text, nullptr, false) : nlohmann::json();
        if (json.is_object()) reference = Parse<DataProfileReport>(json);
      }
      if (!reference) {
        context.Record(a.run.id, "data_reference_missing", store::Severity::kWarning,
                       "the current release's data (run " + std::to_string(*reference_run) +
                           ") has no profile to compare with: tonight's data is checked alone");
      }
    }
    co_return CompareDataProfiles(tonight, reference, reference ? reference_run : std::nullopt,
                                  context.config().data_quality);
  }
};

}  // namespace

std::unique_ptr<CycleStep> MakeDataStep() { return std::make_unique<DataStep>(); }

}  // namespace trainerd::daemon
