// The training worker's JSON-lines event stream (docs/trainer-run.md), turned into what the
// store records: per-update metrics, per-slice evals, events, and the start, finish and
// error objects the run record is filled from.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "trainerd/store/records.h"

namespace trainerd::daemon {

class WorkerReport {
 public:
  // Consumes one line of the worker's stdout at time `now`. Lines that are not JSON objects
  // with an "event" are ignored; so are fields of the wrong type (a string where a number
  // belongs, a count that is negative or does not fit in an int), each such event adding a
  // "worker_protocol" warning event. Never throws.
  void Consume(const std::string& line, double now);

  // The last start, finish and error events, null until seen. Every field the daemon reads
  // from them (docs/trainer-run.md) is absent or has its documented type, so that
  // value(key, default) does not throw: strings, numbers, the objects start.software and
  // start.data, and counts (updates, resumed_from_update, effective_batch) in [0, INT_MAX],
  // finish.peak_bytes in [0, INT64_MAX], start.seed an integer.
  const nlohmann::json& start() const { return start_; }
  const nlohmann::json& finish() const { return finish_; }
  const nlohmann::json& error() const { return error_; }
  // Metrics not taken yet, in update order; the caller stores them in batches.
  std::vector<store::UpdateMetric> TakeMetrics();
  std::size_t pending_metrics() const { return metrics_.size(); }
  // Events not taken yet: warnings, checkpoints and the error, for the store.
  std::vector<store::Event> TakeEvents();
  const std::vector<store::SliceEval>& evals() const { return evals_; }
  // The loss per slice of the eval the worker ran before its first update on the weights of
  // init_from (an eval event marked initial; also in evals() at update 0): empty without.
  const std::map<std::string, double>& initial_losses() const { return initial_losses_; }

  int updates_done() const { return updates_done_; }  // the last update's number (1-based)
  int updates() const { return updates_; }            // the job's total
  double eta_seconds() const { return eta_seconds_; }
  std::optional<int> last_checkpoint_update() const { return last_checkpoint_update_; }

 private:
  nlohmann::json start_;
  nlohmann::json finish_;
  nlohmann::json error_;
  std::vector<store::UpdateMetric> metrics_;
  std::vector<store::Event> events_;
  std::vector<store::SliceEval> evals_;
  std::map<std::string, double> initial_losses_;
  int updates_done_ = 0;
  int updates_ = 0;
  double eta_seconds_ = 0;
  std::optional<int> last_checkpoint_update_;
};

}  // namespace trainerd::daemon
