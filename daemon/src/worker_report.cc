#include "trainerd/daemon/worker_report.h"

#include <cmath>
#include <limits>
#include <type_traits>
#include <variant>

namespace trainerd::daemon {

void WorkerReport::Consume(const std::string& line, double now) {
  Result<ParsedEvent> parsed = ParseWorkerEvent(line);
  if (!parsed.ok()) return;
  if (!parsed->mistyped.empty()) {
    std::string names;
    for (const std::string& name : parsed->mistyped) names += (names.empty() ? "" : ", ") + name;
    events_.push_back(
        {0, now, std::nullopt, "worker_protocol", store::Severity::kWarning,
         "the worker's " + parsed->kind + " event has fields of the wrong type, ignored: " + names,
         line});
  }
  std::visit(
      [&](const auto& event) {
        using Event = std::decay_t<decltype(event)>;
        if constexpr (std::is_same_v<Event, StartEvent> || std::is_same_v<Event, UpdateEvent> ||
                      std::is_same_v<Event, EvalEvent>) {
          Record(event);
        } else if constexpr (std::is_same_v<Event, FinishEvent>) {
          finish_ = event;
        } else if constexpr (!std::is_same_v<Event, PlanEvent>) {
          Record(event, now, line);
        }
      },
      parsed->event);
}

void WorkerReport::Record(const StartEvent& start) {
  start_ = start;
  updates_ = start.updates;
  updates_done_ = start.resumed_from_update;
}

void WorkerReport::Record(const UpdateEvent& update) {
  store::UpdateMetric m;
  updates_done_ = update.update;
  m.update = update.update;
  m.loss = update.loss;
  m.learning_rate = update.lr;
  m.grad_norm = update.grad_norm.value_or(std::numeric_limits<double>::quiet_NaN());
  m.samples_per_second = update.samples_per_second;
  m.live_bytes = update.live_bytes;
  metrics_.push_back(m);
  eta_seconds_ = update.eta_seconds;
}

void WorkerReport::Record(const EvalEvent& eval) {
  for (const SliceLoss& slice : eval.slices) {
    if (slice.name.empty()) continue;  // a slice is named, or it is nothing to record
    evals_.push_back({slice.name, eval.update, slice.loss, slice.baseline_loss,
                      slice.predictions ? ToJson(*slice.predictions).dump() : "",
                      slice.windows ? ToJson(*slice.windows).dump() : ""});
    if (eval.initial) initial_evals_[slice.name] = evals_.back();
  }
}

void WorkerReport::Record(const CheckpointEvent& checkpoint, double now, const std::string& line) {
  last_checkpoint_update_ = checkpoint.update;
  events_.push_back({0, now, std::nullopt, "worker_checkpoint", store::Severity::kInfo,
                     "training checkpoint at update " + std::to_string(checkpoint.update) + " (" +
                         checkpoint.reason + ")",
                     line});
}

void WorkerReport::Record(const WarningEvent& warning, double now, const std::string& line) {
  events_.push_back(
      {0, now, std::nullopt, "worker_warning", store::Severity::kWarning, warning.message, line});
}

void WorkerReport::Record(const ErrorEvent& error, double now, const std::string& line) {
  error_ = error;
  const std::string phase = error.phase ? " in " + *error.phase : "";
  events_.push_back({0, now, std::nullopt, "worker_error", store::Severity::kError,
                     error.kind + phase + ": " + error.message, line});
}

std::vector<store::UpdateMetric> WorkerReport::TakeMetrics() {
  std::vector<store::UpdateMetric> taken;
  taken.swap(metrics_);
  return taken;
}

std::vector<store::Event> WorkerReport::TakeEvents() {
  std::vector<store::Event> taken;
  taken.swap(events_);
  return taken;
}

}  // namespace trainerd::daemon
