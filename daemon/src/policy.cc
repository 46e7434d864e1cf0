#include "trainerd/daemon/policy.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "trainerd/common/divergence.h"
#include "trainerd/common/enum_names.h"
#include "trainerd/daemon/eval_noise.h"
#include "trainerd/daemon/json_text.h"
#include "trainerd/trainer/spec/worker_protocol.h"

namespace trainerd::daemon {

namespace {

constexpr EnumNames<AttemptOutcome, 9> kAttemptOutcomeNames{{{
    {AttemptOutcome::kSucceeded, "succeeded"},
    {AttemptOutcome::kOom, "oom"},
    {AttemptOutcome::kLeak, "leak"},
    {AttemptOutcome::kCrashed, "crash"},
    {AttemptOutcome::kDeadline, "deadline"},
    {AttemptOutcome::kInterrupted, "interrupted"},
    {AttemptOutcome::kCancelled, "cancelled"},
    {AttemptOutcome::kRejected, "rejected"},
    {AttemptOutcome::kDataQuality, "data_quality"},
}}};

constexpr EnumNames<PlanSource, 5> kPlanSourceNames{{{
    {PlanSource::kValidated, "validated"},
    {PlanSource::kConfig, "config"},
    {PlanSource::kPlanner, "planner"},
    {PlanSource::kReplanSmaller, "replan-smaller-budget"},
    {PlanSource::kBaseline, "named-baseline"},
}}};

}  // namespace

std::string_view ToString(AttemptOutcome outcome) { return kAttemptOutcomeNames.Name(outcome); }

store::RunStatus RunStatusFor(AttemptOutcome outcome) {
  switch (outcome) {
    case AttemptOutcome::kSucceeded:
      return store::RunStatus::kSucceeded;
    case AttemptOutcome::kOom:
      return store::RunStatus::kOom;
    case AttemptOutcome::kLeak:
      return store::RunStatus::kLeak;
    case AttemptOutcome::kCrashed:
      return store::RunStatus::kCrashed;
    case AttemptOutcome::kDeadline:
      return store::RunStatus::kDeadline;
    case AttemptOutcome::kInterrupted:
      return store::RunStatus::kInterrupted;
    case AttemptOutcome::kCancelled:
      return store::RunStatus::kCancelled;
    case AttemptOutcome::kRejected:
      return store::RunStatus::kRejected;
    case AttemptOutcome::kDataQuality:
      return store::RunStatus::kDataQuality;
  }
  return store::RunStatus::kCrashed;
}

bool CallsForFallback(AttemptOutcome outcome) {
  switch (outcome) {
    case AttemptOutcome::kOom:
    case AttemptOutcome::kCrashed:
    case AttemptOutcome::kLeak:
    case AttemptOutcome::kRejected:
      return true;
    case AttemptOutcome::kSucceeded:
    case AttemptOutcome::kDeadline:
    case AttemptOutcome::kInterrupted:
    case AttemptOutcome::kCancelled:
    case AttemptOutcome::kDataQuality:
      return false;
  }
  return false;
}

AttemptOutcome ClassifyExit(const WorkerExit& exit) {
  // What the daemon did comes first: a worker it stopped exits 75 or is killed.
  switch (exit.stopped_by) {
    case WorkerExit::StoppedBy::kDeadline:
      return AttemptOutcome::kDeadline;
    case WorkerExit::StoppedBy::kDaemonStop:
      return AttemptOutcome::kInterrupted;
    case WorkerExit::StoppedBy::kOperator:
      return AttemptOutcome::kCancelled;
    case WorkerExit::StoppedBy::kNobody:
      break;
  }
  if (exit.exited && exit.code == 0 && exit.saw_finish) return AttemptOutcome::kSucceeded;
  if (exit.error_kind == "oom" || (exit.exited && exit.code == 4)) return AttemptOutcome::kOom;
  if (!exit.exited && exit.signal == 9 && exit.oom_kill_rose) return AttemptOutcome::kOom;
  if (exit.error_kind == "leak" || (exit.exited && exit.code == 8)) return AttemptOutcome::kLeak;
  return AttemptOutcome::kCrashed;
}

AttemptOutcome ClassifyParityCheck(const WorkerExit& exit, bool report_passed) {
  if (exit.stopped_by != WorkerExit::StoppedBy::kNobody) return ClassifyExit(exit);
  if (exit.exited && exit.code == 0) {
    return report_passed ? AttemptOutcome::kSucceeded : AttemptOutcome::kCrashed;
  }
  if (exit.exited && exit.code == kParityFailedExitCode) return AttemptOutcome::kRejected;
  WorkerExit without_finish = exit;
  without_finish.saw_finish = false;
  return ClassifyExit(without_finish) == AttemptOutcome::kOom ? AttemptOutcome::kOom
                                                              : AttemptOutcome::kCrashed;
}

std::string_view ToString(PlanSource source) { return kPlanSourceNames.Name(source); }

PlanSpec NamedBaselinePlan(int effective_batch, int blocks) {
  PlanSpec plan;
  plan.microbatch = 1;
  plan.accumulation_steps = effective_batch;
  for (int b = 0; b < blocks; ++b) plan.checkpoint_blocks.push_back(b);
  plan.precision = Precision::kFp32;
  return plan;
}

PlanSource FirstPlanSource(bool has_validated_plan, bool job_has_plan) {
  if (has_validated_plan) return PlanSource::kValidated;
  return job_has_plan ? PlanSource::kConfig : PlanSource::kPlanner;
}

bool IsValidatedPlan(const Attempt& attempt, const std::optional<PlanSpec>& validated_plan) {
  return attempt.source == PlanSource::kValidated || attempt.plan == validated_plan;
}

std::optional<std::int64_t> ModelRollbackTarget(const std::vector<store::Release>& releases) {
  const auto current = std::find_if(releases.begin(), releases.end(),
                                    [](const store::Release& r) { return r.current; });
  if (current == releases.end()) return std::nullopt;
  std::optional<std::int64_t> target;
  for (const store::Release& r : releases) {
    if (r.id < current->id && r.gate_passed && !r.withdrawn_json && !r.files_removed_at &&
        (!target || r.id > *target)) {
      target = r.id;
    }
  }
  return target;
}

bool MarkBadAfterRegression(store::ConfigState state) {
  return state == store::ConfigState::kCandidate;
}

namespace {

// Position on the ladder: the first sources share rung 0.
int Rung(PlanSource source) {
  switch (source) {
    case PlanSource::kValidated:
    case PlanSource::kConfig:
    case PlanSource::kPlanner:
      return 0;
    case PlanSource::kReplanSmaller:
      return 1;
    case PlanSource::kBaseline:
      return 2;
  }
  return 2;
}

bool AlreadyTried(const std::vector<Attempt>& tried, const std::string& config_hash,
                  const PlanSpec& plan) {
  return std::any_of(tried.begin(), tried.end(), [&](const Attempt& a) {
    return a.config_hash == config_hash && a.plan == plan;
  });
}

}  // namespace

FallbackDecision DecideFallback(const FallbackInput& input) {
  FallbackDecision d;
  const Attempt& failed = input.tried.back();
  const std::string what = std::string(ToString(input.outcome));
  const bool candidate = input.config_state == store::ConfigState::kCandidate;
  const bool out_of_attempts = static_cast<int>(input.tried.size()) >= input.max_attempts;
  const bool out_of_time = input.seconds_left < kMinimumAttemptSeconds;
  auto give_up = [&](const std::string& why) {
    d.retry = false;
    d.config_hash = failed.config_hash;
    d.reason = "after " + what + ": no retry, " + why;
    return d;
  };
  if (!CallsForFallback(input.outcome)) return give_up("the attempt did not fail");

  if (candidate && input.known_good_hash && *input.known_good_hash != failed.config_hash) {
    d.mark_config_bad = true;
    d.rolled_back = true;
    d.config_hash = *input.known_good_hash;
    d.retry = !out_of_attempts && !out_of_time;
    d.reason = "candidate config " + failed.config_hash.substr(0, 12) + " failed (" + what +
               "): marked bad, active config rolled back to known-good " +
               input.known_good_hash->substr(0, 12) +
               (d.retry           ? ""
                : out_of_attempts ? "; no attempt left in this cycle"
                                  : "; not enough time left in the window");
    return d;
  }
  if (out_of_attempts) {
    d.mark_config_bad = candidate;
    return give_up(std::to_string(input.max_attempts) + " attempts made (retries.max_attempts)");
  }
  if (out_of_time) {
    d.mark_config_bad = candidate;
    return give_up("fewer than " + std::to_string(static_cast<int>(kMinimumAttemptSeconds)) +
                   " s left before the deadline");
  }

  const int rung = Rung(failed.source);
  d.retry = true;
  d.config_hash = failed.config_hash;
  if (rung == 0 && failed.source != PlanSource::kValidated && input.validated_plan &&
      !AlreadyTried(input.tried, failed.config_hash, *input.validated_plan)) {
    d.source = PlanSource::kValidated;
    d.plan = input.validated_plan;
    d.reason = "after " + what + ": retrying with the last validated plan of this config";
    return d;
  }
  if (rung <= 0) {
    d.source = PlanSource::kReplanSmaller;
    d.reason = "after " + what + ": re-planning for " +
               std::to_string(static_cast<int>(std::lround(kReplanBudgetFraction * 100))) +
               "% of the memory budget";
    return d;
  }
  if (rung <= 1 && !AlreadyTried(input.tried, failed.config_hash, input.baseline_plan)) {
    d.source = PlanSource::kBaseline;
    d.plan = input.baseline_plan;
    d.reason = "after " + what + ": retrying with the named baseline plan";
    return d;
  }
  // The baseline's activations are the least any plan keeps: what still does not fit (an OOM,
  // or a ledger over the budget, which rejects it before training) is the model's own state.
  const bool out_of_memory =
      input.outcome == AttemptOutcome::kOom || input.outcome == AttemptOutcome::kRejected;
  if (out_of_memory && input.baseline_on_host &&
      !AlreadyTried(input.tried, failed.config_hash, *input.baseline_on_host)) {
    d.source = PlanSource::kBaseline;
    d.plan = input.baseline_on_host;
    d.reason = "after " + what +
               ": retrying with the named baseline plan, its optimizer state "
               "on the host";
    return d;
  }
  d.mark_config_bad = candidate;
  return give_up("every fallback plan of this config has been tried");
}

ThroughputVerdict CheckThroughput(std::optional<double> measured,
                                  const std::optional<store::RunRecord>& baseline,
                                  const std::string& shapes_json, double tolerance) {
  ThroughputVerdict v;
  if (!measured) {
    v.reason =
        "no throughput measured (the worker trained no update: it resumed at the job's "
        "last checkpoint); throughput not compared";
    return v;
  }
  const double samples_per_second = *measured;
  v.samples_per_second = samples_per_second;
  if (!baseline || !baseline->samples_per_second) {
    v.reason = "no earlier succeeded run on this hardware to compare throughput with";
    return v;
  }
  if (baseline->shapes_json != shapes_json) {
    v.reason = "the last succeeded run on this hardware (run " + std::to_string(baseline->id) +
               ") trained other shapes; throughput not compared";
    return v;
  }
  v.baseline_run_id = baseline->id;
  v.baseline_samples_per_second = *baseline->samples_per_second;
  const double floor = v.baseline_samples_per_second * (1 - tolerance);
  v.regressed = samples_per_second < floor;
  char buffer[256];
  std::snprintf(buffer, sizeof buffer,
                "%.1f samples/s against %.1f in run %lld (tolerance %.0f%%, floor %.1f)",
                samples_per_second, v.baseline_samples_per_second,
                static_cast<long long>(baseline->id), tolerance * 100, floor);
  v.reason = buffer;
  return v;
}

SliceEvals FinalSliceEvals(const std::vector<store::SliceEval>& evals) {
  SliceEvals last;
  for (const store::SliceEval& e : evals) {
    auto [it, inserted] = last.try_emplace(e.slice, e);
    if (!inserted && e.update > it->second.update) it->second = e;
  }
  return last;
}

std::map<std::string, double> FinalSliceLosses(const std::vector<store::SliceEval>& evals) {
  std::map<std::string, double> losses;
  for (const auto& [slice, eval] : FinalSliceEvals(evals)) losses[slice] = eval.loss;
  return losses;
}

std::optional<double> PredictionDivergence(const std::string& predictions_json,
                                           const std::string& reference_json) {
  if (predictions_json.empty() || reference_json.empty()) return std::nullopt;
  const auto parse = [](const std::string& text) {
    return Parse<PredictionDistribution>(nlohmann::json::parse(text, nullptr, false));
  };
  const PredictionDistribution a = parse(predictions_json);
  const PredictionDistribution b = parse(reference_json);
  std::optional<double> largest;
  for (const auto& [x, y] : {std::pair{&a.entropy, &b.entropy}, std::pair{&a.top1, &b.top1},
                             std::pair{&a.classes, &b.classes}}) {
    if (const std::optional<double> d = JensenShannonBits(*x, *y)) {
      largest = std::max(largest.value_or(0.0), *d);
    }
  }
  return largest;
}

namespace {

// One slice's loss (its `windows`, if stored) against the reference's: beyond reference x
// (1 + tolerance), and by more than `z` standard errors of the difference where both
// evaluations have their windows. Returns whether it is within (passes).
bool JudgeAgainstReference(const store::SliceEval& eval, const std::optional<WindowLosses>& windows,
                           const store::SliceEval& reference, bool same_windows, double z,
                           SliceVerdict& s) {
  s.reference = reference.loss;
  const double scale = 1 + s.tolerance;
  const std::optional<WindowLosses> reference_windows = ParseWindowLosses(reference.windows_json);
  if (reference_windows) s.reference_standard_error = StandardError(*reference_windows);
  if (windows && reference_windows) {
    if (const std::optional<DifferenceNoise> noise =
            DifferenceStandardError(*windows, *reference_windows, scale, same_windows)) {
      s.difference_standard_error = noise->standard_error;
      s.paired = noise->paired;
    }
  }
  const double excess = eval.loss - reference.loss * scale;
  if (excess <= 0) return true;
  if (std::isnan(excess)) return false;  // a loss or a reference that is not a number
  s.within_noise = s.difference_standard_error && excess <= z * *s.difference_standard_error;
  return s.within_noise;
}

}  // namespace

GateVerdict ReleaseGate(const SliceEvals& evals, const std::optional<SliceEvals>& reference_evals,
                        std::optional<std::int64_t> reference_run_id, bool same_windows,
                        const RegressionConfig& regression) {
  GateVerdict g;
  g.reference_run_id = reference_run_id;
  g.confidence = regression.gate_confidence;
  g.baseline_margin = regression.baseline_margin;
  const double z = NormalQuantile(regression.gate_confidence);
  std::vector<std::string> worse;         // than the reference beyond tolerance (or not finite)
  std::vector<std::string> within_noise;  // beyond tolerance, not beyond the noise
  std::vector<std::string> not_beating;   // the simple baseline by its margin
  for (const auto& [slice, eval] : evals) {
    SliceVerdict s;
    s.slice = slice;
    s.loss = eval.loss;
    s.tolerance = regression.ToleranceFor(slice);
    s.baseline = eval.baseline_loss;
    const std::optional<WindowLosses> windows = ParseWindowLosses(eval.windows_json);
    if (windows) s.standard_error = StandardError(*windows);
    bool within = std::isfinite(eval.loss);
    if (reference_evals) {
      if (auto it = reference_evals->find(slice); it != reference_evals->end()) {
        within = JudgeAgainstReference(eval, windows, it->second, same_windows, z, s);
        s.prediction_divergence =
            PredictionDivergence(eval.predictions_json, it->second.predictions_json);
      }
    }
    if (regression.beat_baseline && s.baseline) {
      s.beats_baseline = eval.loss < *s.baseline * (1 - regression.baseline_margin);
    }
    s.pass = within && s.beats_baseline;
    if (!within) worse.push_back(slice);
    if (s.within_noise) within_noise.push_back(slice);
    if (!s.beats_baseline) {
      char figures[64];
      std::snprintf(figures, sizeof figures, " (%.4f against %.4f)", eval.loss, *s.baseline);
      not_beating.push_back(slice + figures);
    }
    g.slices.push_back(s);
  }
  g.pass = worse.empty() && not_beating.empty() && !evals.empty();
  const auto names = [](const std::vector<std::string>& list) {
    std::string joined;
    for (const std::string& name : list) joined += (joined.empty() ? "" : ", ") + name;
    return joined;
  };
  char level[64];
  std::snprintf(level, sizeof level, "one-sided, at %g%% confidence",
                100 * regression.gate_confidence);
  std::vector<std::string> reasons;
  if (evals.empty()) {
    reasons.push_back("the run reported no eval losses");
  } else if (!worse.empty()) {
    reasons.push_back(reference_evals
                          ? "eval loss worse than the current release beyond tolerance (and "
                            "the noise, where measured, " +
                                std::string(level) + ") on: " + names(worse)
                          : "non-finite eval loss on " + worse.front());
  }
  if (!not_beating.empty()) {
    char margin[80];
    std::snprintf(margin, sizeof margin, "eval loss not %g%% below the simple baseline's on: ",
                  100 * regression.baseline_margin);
    reasons.push_back(margin + names(not_beating));
  }
  if (reasons.empty()) {
    reasons.push_back(reference_evals
                          ? "every slice within tolerance of the current release (run " +
                                std::to_string(reference_run_id.value_or(0)) + ")"
                          : "no current release: every slice has a finite eval loss");
    if (regression.beat_baseline) reasons.back() += " and beats the simple baseline";
  }
  if (!within_noise.empty()) {
    reasons.push_back("beyond tolerance but within the noise (" + std::string(level) +
                      ") on: " + names(within_noise));
  }
  g.reason = names(reasons);
  return g;
}

std::string GateVerdict::ToJson() const {
  nlohmann::json slices_json = nlohmann::json::array();
  for (const SliceVerdict& s : slices) {
    slices_json.push_back({{"slice", s.slice},
                           {"loss", std::isfinite(s.loss) ? nlohmann::json(s.loss) : nullptr},
                           {"standard_error", FigureJson(s.standard_error)},
                           {"reference", FigureJson(s.reference)},
                           {"reference_standard_error", FigureJson(s.reference_standard_error)},
                           {"tolerance", s.tolerance},
                           {"difference_standard_error", FigureJson(s.difference_standard_error)},
                           {"paired", s.paired},
                           {"within_noise", s.within_noise},
                           {"baseline", FigureJson(s.baseline)},
                           {"beats_baseline", s.beats_baseline},
                           {"prediction_divergence", FigureJson(s.prediction_divergence)},
                           {"pass", s.pass}});
  }
  return nlohmann::json{{"pass", pass},
                        {"reason", reason},
                        {"reference_run_id", reference_run_id ? nlohmann::json(*reference_run_id)
                                                              : nlohmann::json(nullptr)},
                        {"reference_evaluated_here", reference_evaluated_here},
                        {"confidence", confidence},
                        {"baseline_margin", baseline_margin},
                        {"slices", slices_json}}
      .dump();
}

}  // namespace trainerd::daemon
