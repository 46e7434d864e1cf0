// The fallback, rollback, regression and release policy: every decision the nightly cycle
// takes after a worker attempt, in one place, as pure functions of what happened (no clock,
// no store, no processes), so that each rule is unit-tested. See docs/daemon.md.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "trainerd/daemon/daemon_config.h"
#include "trainerd/store/records.h"

namespace trainerd::daemon {

// How an attempt ended, from the worker's exit and events.
enum class AttemptOutcome {
  kSucceeded,    // exit 0 with a finish event
  kOom,          // an oom error event or exit 4, or SIGKILL by the kernel's OOM killer
  kLeak,         // a leak error event or exit 8
  kCrashed,      // any other abnormal exit
  kDeadline,     // stopped by the daemon at the completion deadline
  kInterrupted,  // stopped because the daemon is stopping
  kCancelled,    // stopped by an operator
  // The plan was refused before training: its measured ledger exceeds the usable budget,
  // or it failed the parity check (trainer-run --parity exit 7).
  kRejected,
  // The night's data failed the input-quality check (data_quality.h) before anything trained.
  kDataQuality,
};
std::string_view ToString(AttemptOutcome outcome);
store::RunStatus RunStatusFor(AttemptOutcome outcome);
// True for the outcomes that call for DecideFallback: kOom, kCrashed, kLeak and kRejected.
// A succeeded attempt ends the cycle; so do kDeadline, kInterrupted and kCancelled, which
// the daemon caused and no other plan would change, and kDataQuality: no plan fixes the data.
bool CallsForFallback(AttemptOutcome outcome);

// What the daemon knows about a worker that has exited.
struct WorkerExit {
  bool exited = false;         // exited normally (else killed by a signal)
  int code = 0;                // exit code when `exited`
  int signal = 0;              // the killing signal otherwise
  bool saw_finish = false;     // a `finish` event was read
  std::string error_kind;      // the `kind` of its `error` event, if any
  bool oom_kill_rose = false;  // the cgroup's oom_kill count rose while it ran
  // Why the daemon itself stopped it, if it did.
  enum class StoppedBy {
    kNobody,
    kDeadline,
    kDaemonStop,
    kOperator
  } stopped_by = StoppedBy::kNobody;
};
AttemptOutcome ClassifyExit(const WorkerExit& exit);

// trainer-run --parity exits with this code when the plan does not match the reference.
inline constexpr int kParityFailedExitCode = 7;

// How a parity check (trainer-run --parity) ended: kSucceeded when the plan passed (exit 0
// with a report whose `pass` is true: `report_passed`), kRejected when it does not match the
// reference (exit 7); kDeadline, kInterrupted or kCancelled when the daemon stopped it; kOom
// as ClassifyExit finds one (exit 4, an oom error event, the kernel's OOM killer); anything
// else, an exit 0 without a passing report included, kCrashed.
AttemptOutcome ClassifyParityCheck(const WorkerExit& exit, bool report_passed);

// Where an attempt's plan came from, in the order the ladder tries them.
enum class PlanSource {
  kValidated,      // the last plan that succeeded for this config version on this hardware
  kConfig,         // the job spec's own `plan:` section
  kPlanner,        // the planner at the job's budget
  kReplanSmaller,  // the planner at kReplanBudgetFraction of the job's budget
  kBaseline,       // the named baseline: microbatch 1, every block checkpointed, fp32
};
std::string_view ToString(PlanSource source);

// A re-plan after a failure plans for this fraction of the job's memory budget.
inline constexpr double kReplanBudgetFraction = 0.75;

// The named baseline plan of a job: microbatch 1, `effective_batch` accumulation steps,
// every one of `blocks` checkpointed, fp32.
PlanSpec NamedBaselinePlan(int effective_batch, int blocks);

struct Attempt {
  std::string config_hash;
  PlanSource source = PlanSource::kPlanner;
  PlanSpec plan;
};

// The attempt's plan is validated for its config version on this hardware, so the parity
// check is not run again: its source is kValidated, or it equals `validated_plan` (the plan
// of the newest succeeded run of that config on this hardware, if any).
bool IsValidatedPlan(const Attempt& attempt, const std::optional<PlanSpec>& validated_plan);

// Everything the fallback rule looks at after a failed attempt.
struct FallbackInput {
  AttemptOutcome outcome = AttemptOutcome::kCrashed;  // one that CallsForFallback
  std::vector<Attempt> tried;                         // this cycle's attempts, the failed one last
  store::ConfigState config_state = store::ConfigState::kCandidate;  // of the failed config
  std::optional<std::string> known_good_hash;  // the last known-good version, if any
  // The last validated plan of the failed config on this hardware, if any.
  std::optional<PlanSpec> validated_plan;
  PlanSpec baseline_plan;  // NamedBaselinePlan of the failed config's job
  // The named baseline with its optimizer state on the host (docs/model-state.md), the last
  // rung after the baseline itself ran out of memory or was rejected (its ledger over the
  // budget, or its parity check): set unless the job's planner.optimizer_states leaves the
  // host out.
  std::optional<PlanSpec> baseline_on_host;
  int max_attempts = 1;
  double seconds_left = 0;  // until the deadline less the grace period
};

// What to do next.
struct FallbackDecision {
  bool retry = false;
  bool mark_config_bad = false;  // the failed config becomes bad
  // The active config returns to the last known-good version (`config_hash`); a retry
  // starts its ladder at FirstPlanSource.
  bool rolled_back = false;
  std::string config_hash;  // the config of the next attempt
  // Without a rollback: the next attempt's plan source, and its plan for kValidated and
  // kBaseline (planners plan when the attempt starts).
  PlanSource source = PlanSource::kPlanner;
  std::optional<PlanSpec> plan;
  std::string reason;  // one sentence for the event log
};

// Below this many seconds before the deadline no new attempt is started.
inline constexpr double kMinimumAttemptSeconds = 30;

// The rule (docs/daemon.md, "Fallback"): a failed candidate config with a known-good version
// to return to is marked bad and the cycle rolls back to the known-good version, starting its
// plan ladder afresh. Otherwise the same config retries down its ladder: the last validated
// plan, a re-plan at kReplanBudgetFraction of the budget, the named baseline, skipping a plan
// already tried. A rejected plan (kRejected) takes the same way as an OOM. No retry when
// attempts or time run out, the ladder is exhausted, or the outcome does not call for a
// fallback; a candidate that fails for good is marked bad. The effective batch and the
// schedule never change: only the plan (or the config version) does.
FallbackDecision DecideFallback(const FallbackInput& input);

// The release `trainerctl rollback --model` makes current: the newest gate-passed release
// older than the current one that was neither withdrawn nor had its files removed (any
// order of `releases`); none without a current release or such an earlier one.
std::optional<std::int64_t> ModelRollbackTarget(const std::vector<store::Release>& releases);

// After a regressed run: a candidate version is marked bad (the active config returns to the
// last known-good); a version already known-good keeps its state.
bool MarkBadAfterRegression(store::ConfigState state);

// The first plan source of a config version in a cycle: its last validated plan if it has
// one, else the job's own plan, else the planner.
PlanSource FirstPlanSource(bool has_validated_plan, bool job_has_plan);

// Throughput check against the baseline run (the last succeeded run on the same hardware
// with the same shapes). Not regressed, with the reason, when there is no comparable
// baseline or the run measured no throughput (it trained no update).
struct ThroughputVerdict {
  bool regressed = false;
  double samples_per_second = 0;
  double baseline_samples_per_second = 0;
  std::optional<std::int64_t> baseline_run_id;
  std::string reason;
};
ThroughputVerdict CheckThroughput(std::optional<double> samples_per_second,
                                  const std::optional<store::RunRecord>& baseline,
                                  const std::string& shapes_json, double tolerance);

// The release gate: every slice's final eval loss against the current release's, and below
// the simple baseline's loss on the same held-out samples by regression.baseline_margin of it
// (unless regression.beat_baseline is false). Against the release, a slice holds the model
// back when its loss is above reference x (1 + tolerance) by more than the noise: more than
// NormalQuantile(regression.gate_confidence) standard errors of that difference (eval_noise.h),
// a one-sided test; a slice beyond its tolerance but within the noise passes and says so.
// Without the windows of both evaluations (one recorded before them, a module's own loss) the
// tolerance alone judges. `same_windows`: the reference was evaluated on this run's held-out
// windows (the difference is then paired). A slice the reference lacks is judged against the
// baseline alone; a slice without a baseline (a module's own loss) against the reference
// alone. With no current release every slice with a finite loss passes the first test.
// Beside the verdicts: how far the predictions' distribution moved from the reference's
// (PredictionDivergence), which judges nothing.
struct SliceVerdict {
  std::string slice;
  double loss = 0;
  std::optional<double> standard_error;  // of `loss`, from its windows
  std::optional<double> reference;
  std::optional<double> reference_standard_error;
  double tolerance = 0;
  // Of loss - reference x (1 + tolerance); `paired` when taken window by window.
  std::optional<double> difference_standard_error;
  bool paired = false;
  // Beyond its tolerance, but not by more than the noise: passes.
  bool within_noise = false;
  std::optional<double> baseline;  // the simple baseline's loss
  std::optional<double> prediction_divergence;
  bool beats_baseline = true;  // loss < baseline x (1 - margin), or no baseline to beat
  bool pass = true;
};
struct GateVerdict {
  bool pass = true;
  std::vector<SliceVerdict> slices;
  std::optional<std::int64_t> reference_run_id;
  // The reference losses are the release's on this run's held-out data (its initial eval),
  // not those the release recorded on its own.
  bool reference_evaluated_here = false;
  double confidence = 0;       // regression.gate_confidence
  double baseline_margin = 0;  // regression.baseline_margin
  std::string reason;
  std::string ToJson() const;  // the release's gate_details_json
};
// `evals` and `reference_evals`: the final (largest update) eval per slice.
using SliceEvals = std::map<std::string, store::SliceEval>;
GateVerdict ReleaseGate(const SliceEvals& evals, const std::optional<SliceEvals>& reference_evals,
                        std::optional<std::int64_t> reference_run_id, bool same_windows,
                        const RegressionConfig& regression);

// How far apart two evaluations' predictions are (SliceEval::predictions_json): the largest
// Jensen-Shannon divergence, in bits, among the histograms both have (entropy, top-1
// probability, predicted class). None when they share none (an mse model, a module's own
// loss, an evaluation recorded before predictions were).
std::optional<double> PredictionDivergence(const std::string& predictions_json,
                                           const std::string& reference_json);

// The final eval per slice of a run's evals (the largest update of each slice), and its loss.
SliceEvals FinalSliceEvals(const std::vector<store::SliceEval>& evals);
std::map<std::string, double> FinalSliceLosses(const std::vector<store::SliceEval>& evals);

}  // namespace trainerd::daemon
