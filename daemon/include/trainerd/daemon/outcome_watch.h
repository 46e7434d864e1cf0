// After the release: the current release's matured outcomes against those of the release it
// replaced, and the rollback when they regress (docs/outcomes.md). The daemon looks after
// each night, after each outcome import and every outcomes.check_interval.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "trainerd/daemon/clock.h"
#include "trainerd/daemon/daemon_config.h"
#include "trainerd/daemon/daemon_metrics.h"
#include "trainerd/daemon/file_store.h"
#include "trainerd/store/store.h"

namespace trainerd::daemon {

// One slice and metric of two releases side by side.
struct OutcomeComparison {
  store::OutcomeTotal current;
  store::OutcomeTotal previous;
  // How much worse the current value is, as a fraction of the previous one's magnitude
  // (negative: better); a regression when above the metric's tolerance by more than the
  // noise (OutcomeStandardError): a one-sided test at outcomes.confidence.
  double worse_by = 0;
  double tolerance = 0;
  // Of each mean, and of how much worse the current one is than the tolerance allows (the
  // previous mean scaled by 1 -+ tolerance); none where a release's outcomes came in one line.
  std::optional<double> current_standard_error;
  std::optional<double> previous_standard_error;
  std::optional<double> difference_standard_error;
  bool within_noise = false;  // worse beyond the tolerance, not beyond the noise
  bool regressed = false;
};

// The standard error of a release's mean outcome, from its lines: each line's value is the
// mean of its `count` outcomes, so with lines i of counts c_i and the mean m, one outcome's
// variance is estimated by sum_i c_i (v_i - m)^2 / (lines - 1) (each line's value varies with
// 1/c_i of it), and the mean's is that over the total count. None from fewer than two lines.
// A serving side that reports every day's outcomes on a line of its own gives the watch the
// day-to-day spread, weekday effects included.
std::optional<double> OutcomeStandardError(const store::OutcomeTotal& total);

struct OutcomeVerdict {
  std::vector<OutcomeComparison> compared;  // every judged metric and slice with enough outcomes
  // Why the others are not compared yet, one line each ("ctr: live 20 h of its 72 h maturity",
  // "ctr on en: 40 of 100 outcomes for the current release").
  std::vector<std::string> waiting;
  bool regressed() const;
};

// The pure comparison: each metric of `config` whose maturity the current release has been
// live for (`live_seconds`), on each judged slice with at least min_count outcomes for both;
// worse beyond the tolerance and, where both means have a standard error, beyond
// NormalQuantile(config.confidence) standard errors of the difference.
OutcomeVerdict CompareOutcomes(const OutcomesConfig& config,
                               const std::vector<store::OutcomeTotal>& current,
                               const std::vector<store::OutcomeTotal>& previous,
                               double live_seconds);

// The totals of `totals` the watch judges: of a metric `config` names, on a slice it judges
// (any, when it names none). What the metrics export: the serving side may report any names.
std::vector<store::OutcomeTotal> JudgedTotals(const OutcomesConfig& config,
                                              const std::vector<store::OutcomeTotal>& totals);

class OutcomeWatch {
 public:
  // `config` is read at each Check (the daemon's, reloaded on SIGHUP); `metrics` may be null.
  OutcomeWatch(const DaemonConfig& config, store::Store& store, FileStore& files,
               const Clock& clock, DaemonMetrics* metrics);

  // The current release against the one it replaced, now; empty without a current release
  // that replaced another. Changes nothing.
  Result<std::optional<OutcomeVerdict>> Verdict();
  // Verdict(), acted on: on a regression of a release that is not pinned, the release is
  // withdrawn and the previous one made current (releases/current follows), an
  // outcome_regression event records the evidence and the rollback is counted; the metrics
  // show both releases' outcomes.
  Result<std::optional<OutcomeVerdict>> Check();

 private:
  struct Judged {
    store::Release current;
    store::Release previous;
    std::vector<store::OutcomeTotal> current_totals, previous_totals;
    OutcomeVerdict verdict;
  };
  Result<std::optional<Judged>> Judge();

  const DaemonConfig& config_;
  store::Store& store_;
  FileStore& files_;
  const Clock& clock_;
  DaemonMetrics* metrics_;
};

// The evidence of a comparison as JSON (events, trainerctl release show).
nlohmann::json ToJson(const OutcomeVerdict& verdict);

}  // namespace trainerd::daemon
