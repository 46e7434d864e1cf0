// A judged run's release: the run's end recorded, its model copied into a release folder
// (hashes verified) and made current only through the gate (releases/current switched), and
// its config version's state following the verdict: known-good, or bad with a rollback to the
// last known-good version.
#include <filesystem>

#include "cycle/cycle_steps.h"
#include "trainerd/common/json_input.h"
#include "trainerd/daemon/current_release.h"
#include "trainerd/daemon/release_folders.h"
#include "trainerd/daemon/state_layout.h"

namespace trainerd::daemon {
namespace {

class ReleaseStep : public CycleStep {
 public:
  const char* name() const override { return "release"; }

  asio::awaitable<void> Run(CycleState& state, CycleContext& context) override {
    AttemptState& a = state.current;
    if (!a.end || a.end->outcome != AttemptOutcome::kSucceeded) co_return;  // not judged
    FinishAttempt(state, context, *a.end);
    a.released = Publish(a, context);
    UpdateConfigState(state, context);
    // The job is done: the next night trains afresh rather than resuming a finished job.
    context.files().Remove(StateLayout(context.config().state_dir).WorkDir() + "/checkpoint.pt");
  }

 private:
  // The worker's model files copied into the release folder `dir`: model.pt (verified
  // against model_sha256) and, when the worker wrote them, model.safetensors and the files
  // its model's code needs beside it (each verified, at its path relative to the weights) and
  // model.json with the release's identity added. Returns model.pt's hash.
  static Result<std::string> CopyReleaseFiles(const FinishEvent& fin, const store::RunRecord& run,
                                              bool released, const std::string& dir,
                                              CycleContext& context) {
    FileStore& files = context.files();
    const std::string model_path =
        fin.model_path.empty() ? StateLayout(context.config().state_dir).WorkDir() + "/model.pt"
                               : fin.model_path;
    Result<std::string> copied =
        files.CopyVerified(model_path, dir + "/model.pt", fin.model_sha256.hex);
    if (!copied.ok()) return copied.status();
    const FinishEvent::ModelFiles& model_files = fin.model_files;
    if (model_files.weights.empty() || model_files.description.empty()) return copied;
    Result<std::string> weights = files.CopyVerified(
        model_files.weights, dir + "/model.safetensors", model_files.weights_sha256.hex);
    if (!weights.ok()) return weights.status();
    // Where the worker wrote them, relative to the weights (an adapter job's adapter/ folder).
    for (const FinishEvent::Companion& companion : model_files.companions) {
      const std::string name = CompanionName(model_files.weights, companion.path);
      if (name.empty()) {
        return Status::InvalidArgument("the worker named a model companion without a file name: " +
                                       companion.path);
      }
      Result<std::string> copied_companion =
          files.CopyVerified(companion.path, dir + "/" + name, companion.sha256.hex);
      if (!copied_companion.ok()) return copied_companion.status();
    }
    Result<std::string> text = files.Read(model_files.description);
    if (!text.ok()) return text.status();
    nlohmann::json description = ParseBoundedJson(*text);
    if (!description.is_object()) {
      return Status::Corruption(model_files.description +
                                ": the model description is not a JSON object");
    }
    description["release"] = {{"run_id", run.id},
                              {"config_hash", run.config_hash},
                              {"model_sha256", fin.model_sha256.hex},
                              {"weights_sha256", model_files.weights_sha256.hex},
                              {"gate_passed", released},
                              {"published_at", context.clock().Now()}};
    if (Status s = files.WriteAtomically(dir + "/model.json", description.dump(2) + "\n");
        !s.ok()) {
      return s;
    }
    return copied;
  }

  // Publishes the model (current only through the gate, then releases/current points at
  // it); true when it became current.
  static bool Publish(const AttemptState& a, CycleContext& context) {
    const store::RunRecord& run = a.run;
    const std::optional<FinishEvent>& fin = a.training.report.finish();
    const bool regressed = a.end->regressed;
    // The artifact: published (hashed) either way, current only through the gate. The hash
    // names the folder: without 64 hex digits nothing is published.
    if (!fin || fin->model_sha256.hex.empty()) {
      context.Record(run.id, "release_failed", store::Severity::kError,
                     "the worker reported no valid model_sha256: nothing published");
      return false;
    }
    const std::string dir = StateLayout(context.config().state_dir)
                                .ReleaseDir(run.id, fin->model_sha256.hex, !regressed);
    std::string sha;
    Status staged = StageReleaseFolder(context.files(), dir, [&](const std::string& staging) {
      Result<std::string> copied = CopyReleaseFiles(*fin, run, !regressed, staging, context);
      if (copied.ok()) sha = *copied;
      return copied.status();
    });
    if (!staged.ok()) {
      context.Record(run.id, "release_failed", store::Severity::kError, staged.message());
      return false;
    }
    store::Release release;
    release.run_id = run.id;
    release.artifact_path = dir + "/model.pt";
    release.artifact_hash = sha;
    release.gate_passed = !regressed;
    release.gate_details_json = a.gate.ToJson();
    release.created_at = context.clock().Now();
    store::Store& store = context.store();
    Result<std::int64_t> release_id = store.RecordRelease(release);
    if (!release_id.ok()) {
      context.RecordIfFailed(run.id, release_id.status());
      return false;
    }
    if (regressed) {
      context.Record(run.id, "release_withheld", store::Severity::kWarning,
                     "model " + Short(sha) + " not released; the current release stays");
      return false;
    }
    if (Status s = store.SetCurrentRelease(*release_id, release.created_at); !s.ok()) {
      context.RecordIfFailed(run.id, s);
      return false;
    }
    context.Record(run.id, "released", store::Severity::kInfo,
                   "model " + Short(sha) + " is the current release (" + dir + ")");
    if (Status s = SyncCurrentReleaseLink(store, context.files(), context.config().state_dir);
        !s.ok()) {
      context.Record(run.id, "release_link_failed", store::Severity::kError,
                     "releases/current still names the previous release: " + s.message());
    }
    return true;
  }

  static void UpdateConfigState(const CycleState& state, CycleContext& context) {
    const store::RunRecord& run = state.current.run;
    store::Store& store = context.store();
    const double now = context.clock().Now();
    if (!state.current.end->regressed) {
      context.RecordIfFailed(
          run.id,
          store.SetConfigState({run.config_hash, store::ConfigState::kKnownGood,
                                "run " + std::to_string(run.id) + " finished inside its window",
                                now, run.id}));
      return;
    }
    if (!MarkBadAfterRegression(state.active->version.state)) return;
    context.RecordIfFailed(
        run.id, store.SetConfigState(
                    {run.config_hash, store::ConfigState::kBad,
                     "run " + std::to_string(run.id) + " regressed: " + state.current.end->message,
                     now, run.id}));
    Result<std::optional<store::ConfigVersion>> known_good = store.LastKnownGoodConfig();
    if (known_good.ok() && *known_good) {
      if (context.metrics()) context.metrics()->Rollback("regression");
      context.Record(
          run.id, "rollback", store::Severity::kWarning,
          "candidate config " + Short(run.config_hash) +
              " regressed: marked bad, active config rolled back to known-good " +
              Short((*known_good)->hash),
          nlohmann::json{
              {"from", run.config_hash}, {"to", (*known_good)->hash}, {"reason", "regression"}}
              .dump());
    }
  }
};

}  // namespace

std::unique_ptr<CycleStep> MakeReleaseStep() { return std::make_unique<ReleaseStep>(); }

}  // namespace trainerd::daemon
