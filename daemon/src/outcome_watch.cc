#include "trainerd/daemon/outcome_watch.h"

#include <algorithm>
#include <cmath>

#include "trainerd/daemon/current_release.h"
#include "trainerd/daemon/eval_noise.h"
#include "trainerd/daemon/event_log.h"
#include "trainerd/daemon/json_text.h"

namespace trainerd::daemon {
namespace {

const store::OutcomeTotal* Find(const std::vector<store::OutcomeTotal>& totals,
                                const std::string& slice, const std::string& metric) {
  for (const store::OutcomeTotal& t : totals) {
    if (t.slice == slice && t.metric == metric) return &t;
  }
  return nullptr;
}

std::string Hours(double seconds) {
  return std::to_string(static_cast<long long>(std::floor(seconds / 3600))) + " h";
}

nlohmann::json TotalJson(const store::OutcomeTotal& total,
                         const std::optional<double>& standard_error) {
  return {{"value", total.value},       {"count", total.count},
          {"lines", total.lines},       {"standard_error", FigureJson(standard_error)},
          {"first_at", total.first_at}, {"last_at", total.last_at}};
}

}  // namespace

std::vector<store::OutcomeTotal> JudgedTotals(const OutcomesConfig& config,
                                              const std::vector<store::OutcomeTotal>& totals) {
  std::vector<store::OutcomeTotal> judged;
  for (const store::OutcomeTotal& total : totals) {
    const bool judged_metric =
        std::any_of(config.metrics.begin(), config.metrics.end(),
                    [&](const OutcomeMetricConfig& m) { return m.name == total.metric; });
    const bool judged_slice =
        config.slices.empty() ||
        std::find(config.slices.begin(), config.slices.end(), total.slice) != config.slices.end();
    if (judged_metric && judged_slice) judged.push_back(total);
  }
  return judged;
}

std::optional<double> OutcomeStandardError(const store::OutcomeTotal& total) {
  if (total.lines < 2 || total.count <= 0) return std::nullopt;
  const double n = static_cast<double>(total.count);
  const double spread = std::max(0.0, total.sum_of_squares - n * total.value * total.value);
  const double variance = spread / static_cast<double>(total.lines - 1);
  if (!std::isfinite(variance)) return std::nullopt;
  return std::sqrt(variance / n);
}

bool OutcomeVerdict::regressed() const {
  for (const OutcomeComparison& c : compared) {
    if (c.regressed) return true;
  }
  return false;
}

OutcomeVerdict CompareOutcomes(const OutcomesConfig& config,
                               const std::vector<store::OutcomeTotal>& current,
                               const std::vector<store::OutcomeTotal>& previous,
                               double live_seconds) {
  OutcomeVerdict verdict;
  const double z = NormalQuantile(config.confidence);
  for (const OutcomeMetricConfig& metric : config.metrics) {
    if (live_seconds < metric.maturity_seconds) {
      verdict.waiting.push_back(metric.name + ": live " + Hours(live_seconds) + " of its " +
                                Hours(metric.maturity_seconds) + " maturity");
      continue;
    }
    std::vector<std::string> slices = config.slices;
    if (slices.empty()) {
      for (const store::OutcomeTotal& t : current) {
        if (t.metric == metric.name) slices.push_back(t.slice);
      }
    }
    for (const std::string& slice : slices) {
      const store::OutcomeTotal* now = Find(current, slice, metric.name);
      const store::OutcomeTotal* before = Find(previous, slice, metric.name);
      const std::int64_t now_count = now ? now->count : 0;
      const std::int64_t before_count = before ? before->count : 0;
      if (now_count < metric.min_count || before_count < metric.min_count) {
        verdict.waiting.push_back(metric.name + " on " + slice + ": " + std::to_string(now_count) +
                                  " outcomes for the current release and " +
                                  std::to_string(before_count) + " for the previous, " +
                                  std::to_string(metric.min_count) + " needed for each");
        continue;
      }
      if (!std::isfinite(now->value) || !std::isfinite(before->value)) {
        // A mean the store could not form (its sum overflowed) judges nothing either way.
        verdict.waiting.push_back(metric.name + " on " + slice +
                                  ": the mean of its outcomes is not a finite number; not judged");
        continue;
      }
      OutcomeComparison c;
      c.current = *now;
      c.previous = *before;
      const double worse =
          metric.higher_is_better ? before->value - now->value : now->value - before->value;
      c.worse_by = before->value == 0 ? (worse > 0   ? INFINITY
                                         : worse < 0 ? -INFINITY
                                                     : 0)
                                      : worse / std::abs(before->value);
      c.tolerance = metric.tolerance;
      c.current_standard_error = OutcomeStandardError(*now);
      c.previous_standard_error = OutcomeStandardError(*before);
      if (c.current_standard_error && c.previous_standard_error) {
        // beyond (below) = how much worse than the previous value x (1 -+ tolerance): the
        // previous mean enters scaled by that factor.
        const double sign = before->value < 0 ? -1 : 1;
        const double scale =
            metric.higher_is_better ? 1 - metric.tolerance * sign : 1 + metric.tolerance * sign;
        c.difference_standard_error =
            std::hypot(*c.current_standard_error, scale * *c.previous_standard_error);
      }
      c.regressed = c.worse_by > metric.tolerance;
      if (c.regressed && c.difference_standard_error) {
        const double beyond = worse - metric.tolerance * std::abs(before->value);
        c.within_noise = beyond <= z * *c.difference_standard_error;
        c.regressed = !c.within_noise;
      }
      verdict.compared.push_back(c);
    }
  }
  return verdict;
}

nlohmann::json ToJson(const OutcomeVerdict& verdict) {
  nlohmann::json compared = nlohmann::json::array();
  for (const OutcomeComparison& c : verdict.compared) {
    compared.push_back({{"slice", c.current.slice},
                        {"metric", c.current.metric},
                        {"current", TotalJson(c.current, c.current_standard_error)},
                        {"previous", TotalJson(c.previous, c.previous_standard_error)},
                        {"difference_standard_error", FigureJson(c.difference_standard_error)},
                        {"within_noise", c.within_noise},
                        {"worse_by", std::isfinite(c.worse_by) ? nlohmann::json(c.worse_by)
                                                               : nlohmann::json(nullptr)},
                        {"tolerance", c.tolerance},
                        {"regressed", c.regressed}});
  }
  return {{"compared", compared}, {"waiting", verdict.waiting}, {"regressed", verdict.regressed()}};
}

OutcomeWatch::OutcomeWatch(const DaemonConfig& config, store::Store& store, FileStore& files,
                           const Clock& clock, DaemonMetrics* metrics)
    : config_(config), store_(store), files_(files), clock_(clock), metrics_(metrics) {}

Result<std::optional<OutcomeWatch::Judged>> OutcomeWatch::Judge() {
  const double now = clock_.Now();
  Result<std::optional<store::Release>> current = store_.CurrentRelease();
  if (!current.ok()) return current.status();
  if (!*current || !(*current)->previous_release_id || !(*current)->live_at) {
    return std::optional<Judged>();
  }
  Judged judged;
  judged.current = **current;
  Result<store::Release> previous = store_.GetRelease(*judged.current.previous_release_id);
  if (!previous.ok()) return previous.status();
  judged.previous = *previous;
  Result<std::vector<store::OutcomeTotal>> totals = store_.GetOutcomeTotals(judged.current.id, now);
  if (!totals.ok()) return totals.status();
  judged.current_totals = *std::move(totals);
  Result<std::vector<store::OutcomeTotal>> before =
      store_.GetOutcomeTotals(judged.previous.id, now);
  if (!before.ok()) return before.status();
  judged.previous_totals = *std::move(before);
  judged.verdict = CompareOutcomes(config_.outcomes, judged.current_totals, judged.previous_totals,
                                   now - *judged.current.live_at);
  return std::optional<Judged>(std::move(judged));
}

Result<std::optional<OutcomeVerdict>> OutcomeWatch::Verdict() {
  Result<std::optional<Judged>> judged = Judge();
  if (!judged.ok()) return judged.status();
  if (!*judged) return std::optional<OutcomeVerdict>();
  return std::optional<OutcomeVerdict>((*judged)->verdict);
}

Result<std::optional<OutcomeVerdict>> OutcomeWatch::Check() {
  Result<std::optional<Judged>> judged = Judge();
  if (!judged.ok()) return judged.status();
  if (!*judged) return std::optional<OutcomeVerdict>();
  const double now = clock_.Now();
  const store::Release& release = (*judged)->current;
  const store::Release& previous = (*judged)->previous;
  const OutcomeVerdict& verdict = (*judged)->verdict;
  if (metrics_) {
    metrics_->Outcomes(release.id, JudgedTotals(config_.outcomes, (*judged)->current_totals),
                       previous.id, JudgedTotals(config_.outcomes, (*judged)->previous_totals));
  }
  // A pinned release stays; one whose model the previous release holds too, or whose
  // previous release was withdrawn or lost its files, has nothing to go back to.
  if (!verdict.regressed() || release.pinned || release.artifact_hash == previous.artifact_hash ||
      previous.withdrawn_json || previous.files_removed_at) {
    return std::optional<OutcomeVerdict>(verdict);
  }
  nlohmann::json evidence = ToJson(verdict);
  evidence["release"] = release.id;
  evidence["rolled_back_to"] = previous.id;
  evidence["at"] = now;
  std::string worst;
  for (const OutcomeComparison& c : verdict.compared) {
    if (!c.regressed) continue;
    worst += (worst.empty() ? "" : "; ") + c.current.metric + " on " + c.current.slice + " " +
             NumberText(c.current.value, "%.6g") + " (" + std::to_string(c.current.count) +
             " outcomes) against " + NumberText(c.previous.value, "%.6g") + " (" +
             std::to_string(c.previous.count) + ")";
  }
  if (Status s = store_.WithdrawRelease(release.id, previous.id, evidence.dump(), now); !s.ok()) {
    RecordAndLog(store_,
                 {0, now, release.run_id, "outcome_rollback_failed", store::Severity::kError,
                  "release " + std::to_string(release.id) +
                      "'s outcomes regressed, and it stays current: " + s.message(),
                  evidence.dump()});
    return std::optional<OutcomeVerdict>(verdict);
  }
  if (Status s = SyncCurrentReleaseLink(store_, files_, config_.state_dir); !s.ok()) {
    RecordAndLog(store_,
                 {0, now, release.run_id, "release_link_failed", store::Severity::kError,
                  "releases/current still names the withdrawn release: " + s.message(), "{}"});
  }
  RecordAndLog(store_, {0, now, release.run_id, "outcome_regression", store::Severity::kError,
                        "release " + std::to_string(release.id) + " withdrawn, release " +
                            std::to_string(previous.id) + " current again: " + worst,
                        evidence.dump()});
  if (metrics_) metrics_->Rollback("outcome_regression");
  return std::optional<OutcomeVerdict>(verdict);
}

}  // namespace trainerd::daemon
