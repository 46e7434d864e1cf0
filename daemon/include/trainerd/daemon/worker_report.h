// The training worker's event stream (the worker protocol, trainer/spec/worker_protocol.h),
// turned into what the store records: per-update metrics, per-slice evals, events, and the
// start, finish and error events the run record is filled from.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "trainerd/store/records.h"
#include "trainerd/trainer/spec/worker_protocol.h"

namespace trainerd::daemon {

class WorkerReport {
 public:
  // Consumes one line of the worker's stdout at time `now`. Lines that are not worker events
  // are ignored; fields of the wrong type (a string where a number belongs, a count that is
  // negative or does not fit in an int, a model hash that is not 64 hex digits) keep their
  // defaults, each such event adding a "worker_protocol" warning event that names them.
  // Never throws.
  void Consume(const std::string& line, double now);

  // The last start, finish and error events, empty until seen.
  const std::optional<StartEvent>& start() const { return start_; }
  const std::optional<FinishEvent>& finish() const { return finish_; }
  const std::optional<ErrorEvent>& error() const { return error_; }
  // Metrics not taken yet, in update order; the caller stores them in batches.
  std::vector<store::UpdateMetric> TakeMetrics();
  std::size_t pending_metrics() const { return metrics_.size(); }
  // Events not taken yet: warnings, checkpoints and the error, for the store.
  std::vector<store::Event> TakeEvents();
  const std::vector<store::SliceEval>& evals() const { return evals_; }
  // The eval per slice the worker ran before its first update on the weights of init_from
  // (an eval event marked initial; also in evals() at update 0): empty without.
  const std::map<std::string, store::SliceEval>& initial_evals() const { return initial_evals_; }

  int updates_done() const { return updates_done_; }  // the last update's number (1-based)
  int updates() const { return updates_; }            // the job's total
  double eta_seconds() const { return eta_seconds_; }
  std::optional<int> last_checkpoint_update() const { return last_checkpoint_update_; }

 private:
  void Record(const StartEvent& start);
  void Record(const UpdateEvent& update);
  void Record(const EvalEvent& eval);
  void Record(const CheckpointEvent& checkpoint, double now, const std::string& line);
  void Record(const WarningEvent& warning, double now, const std::string& line);
  void Record(const ErrorEvent& error, double now, const std::string& line);

  std::optional<StartEvent> start_;
  std::optional<FinishEvent> finish_;
  std::optional<ErrorEvent> error_;
  std::vector<store::UpdateMetric> metrics_;
  std::vector<store::Event> events_;
  std::vector<store::SliceEval> evals_;
  std::map<std::string, store::SliceEval> initial_evals_;
  int updates_done_ = 0;
  int updates_ = 0;
  double eta_seconds_ = 0;
  std::optional<int> last_checkpoint_update_;
};

}  // namespace trainerd::daemon
