// The daemon's Prometheus metrics (prometheus-cpp): base units, `_total` counters, bounded
// labels (outcome, reason, category, slice; never a run id, and release ids only of the current
// release and the one it replaced). The nightly cycle and the outcome watch report into
// it; MetricsEndpoint serves it on /metrics. Names and meanings: docs/operations.md and
// deploy/README.md. Counters start at 0 for every label value so that increase() sees the
// first event; gauges about the last run appear after the first finished run (a restarted
// daemon restores them from the store).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "trainerd/common/status.h"
#include "trainerd/store/records.h"

namespace prometheus {
class Registry;
}  // namespace prometheus

namespace trainerd::daemon {

class DaemonMetrics {
 public:
  explicit DaemonMetrics(const std::string& version);
  ~DaemonMetrics();
  DaemonMetrics(const DaemonMetrics&) = delete;
  DaemonMetrics& operator=(const DaemonMetrics&) = delete;

  // A worker attempt started / a training progress report (`predicted_finish`: now + ETA).
  void RunStarted();
  void Progress(double deadline, double predicted_finish);
  // A run ended: counters by outcome, and the last run's gauges from its record (its input-
  // quality figures among them) and its final slice losses. `count` false only restores the
  // gauges (start-up).
  void RunFinished(const store::RunRecord& run, const std::map<std::string, double>& evals,
                   bool count = true);
  // The planner chose a plan: its time model's error on it (predicted / measured update - 1).
  void PlanTimed(double time_model_error);
  // A night whose plan came from the planner trained: the planner's timed update over
  // training's, less 1.
  void PlanTrained(double plan_error);
  // The active job's memory budget and its usable part.
  void Budget(std::int64_t budget_bytes, std::int64_t usable_bytes);
  void LastSuccess(double ended_at);
  // reason: "oom", "crash" or "leak".
  void Fallback(std::string_view reason);
  // reason: "oom", "crash", "leak", "regression", "invalid_config", "operator" or
  // "outcome_regression".
  void Rollback(std::string_view reason);
  // A retention pass: the state directory's bytes after it, the newest run's, and what it
  // removed.
  void Storage(std::int64_t storage_bytes, std::int64_t night_bytes, std::int64_t removed_bytes);
  // The outcomes of the current release and of the one it replaced, replacing those set
  // before (OutcomeWatch::Check): at most 100 series per release, of slices named in at
  // most 128 bytes.
  void Outcomes(std::int64_t current, const std::vector<store::OutcomeTotal>& current_totals,
                std::int64_t previous, const std::vector<store::OutcomeTotal>& previous_totals);

  // The text exposition format, as /metrics serves it.
  std::string Exposition() const;
  // Every metric family it serves, including those with no series yet (the exposition
  // leaves a family out until it has one).
  const std::vector<std::string>& FamilyNames() const;
  std::shared_ptr<prometheus::Registry> registry() const;

 private:
  struct Families;
  // The input-quality check of `run` (its data_quality JSON, data_quality.h): each figure it
  // measured, replacing the last run's, and how many thresholds it breached; without figures
  // none, and 1 breach when the run stopped for its data all the same (unreadable data).
  void DataQuality(const store::RunRecord& run);

  std::unique_ptr<Families> f_;
};

// The HTTP endpoint (prometheus-cpp's civetweb) serving a registry on /metrics.
class MetricsEndpoint {
 public:
  // `listen` is "host:port" (port 0 picks a free one). IOError naming the address when it
  // cannot bind.
  static Result<std::unique_ptr<MetricsEndpoint>> Start(const std::string& listen,
                                                        const DaemonMetrics& metrics);
  ~MetricsEndpoint();
  int port() const;

 private:
  struct Server;
  explicit MetricsEndpoint(std::unique_ptr<Server> server);
  std::unique_ptr<Server> server_;
};

}  // namespace trainerd::daemon
