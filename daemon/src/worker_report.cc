#include "trainerd/daemon/worker_report.h"

#include <limits>

namespace trainerd::daemon {

namespace {

double NumberOr(const nlohmann::json& object, const char* key, double fallback) {
  auto it = object.find(key);
  return it != object.end() && it->is_number() ? it->get<double>() : fallback;
}

}  // namespace

void WorkerReport::Consume(const std::string& line, double now) {
  nlohmann::json event = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!event.is_object() || !event.contains("event") || !event["event"].is_string()) return;
  const std::string kind = event["event"];
  if (kind == "start") {
    start_ = event;
    updates_ = static_cast<int>(NumberOr(event, "updates", 0));
    updates_done_ = static_cast<int>(NumberOr(event, "resumed_from_update", 0));
  } else if (kind == "update") {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    store::UpdateMetric m;
    m.update = static_cast<std::int64_t>(NumberOr(event, "update", 0));
    m.loss = NumberOr(event, "loss", nan);
    m.learning_rate = NumberOr(event, "lr", nan);
    m.grad_norm = NumberOr(event, "grad_norm", nan);
    m.samples_per_second = NumberOr(event, "samples_per_second", nan);
    m.live_bytes = static_cast<std::int64_t>(NumberOr(event, "live_bytes", 0));
    metrics_.push_back(m);
    updates_done_ = static_cast<int>(m.update);
    eta_seconds_ = NumberOr(event, "eta_seconds", 0);
  } else if (kind == "eval") {
    const auto update = static_cast<std::int64_t>(NumberOr(event, "update", 0));
    for (const nlohmann::json& slice : event.value("slices", nlohmann::json::array())) {
      evals_.push_back({slice.value("name", ""), update,
                        NumberOr(slice, "loss", std::numeric_limits<double>::quiet_NaN())});
    }
  } else if (kind == "finish") {
    finish_ = event;
  } else if (kind == "checkpoint") {
    last_checkpoint_update_ = static_cast<int>(NumberOr(event, "update", 0));
    events_.push_back({0, now, std::nullopt, "worker_checkpoint", store::Severity::kInfo,
                       "training checkpoint at update " + std::to_string(*last_checkpoint_update_) +
                           " (" + event.value("reason", "") + ")",
                       event.dump()});
  } else if (kind == "warning") {
    events_.push_back({0, now, std::nullopt, "worker_warning", store::Severity::kWarning,
                       event.value("message", ""), event.dump()});
  } else if (kind == "error") {
    error_ = event;
    events_.push_back({0, now, std::nullopt, "worker_error", store::Severity::kError,
                       event.value("kind", "") + ": " + event.value("message", ""), event.dump()});
  }
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
