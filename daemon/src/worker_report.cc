#include "trainerd/daemon/worker_report.h"

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>

namespace trainerd::daemon {

namespace {

using Json = nlohmann::json;

double NumberOr(const Json& object, const char* key, double fallback) {
  auto it = object.find(key);
  return it != object.end() && it->is_number() ? it->get<double>() : fallback;
}

// Whether `value` is a number whose integer part fits in [0, max]: a cast of a double out of
// range is undefined behaviour, and the counts and sizes of the protocol are never negative.
bool IsCount(const Json& value, std::int64_t max) {
  if (value.is_number_unsigned())
    return value.get<std::uint64_t>() <= static_cast<std::uint64_t>(max);
  if (value.is_number_integer())
    return value.get<std::int64_t>() >= 0 && value.get<std::int64_t>() <= max;
  // max + 1 is a power of two for both int and int64, so exact as a double.
  return value.is_number_float() && value.get<double>() >= 0 &&
         value.get<double>() < static_cast<double>(max / 2 + 1) * 2;
}

// The count at `key` as an Int (a fraction truncated); `fallback` when absent or not a count
// that fits.
template <typename Int>
Int CountOr(const Json& object, const char* key, Int fallback) {
  auto it = object.find(key);
  if (it == object.end() || !IsCount(*it, std::numeric_limits<Int>::max())) return fallback;
  return it->is_number_float() ? static_cast<Int>(it->get<double>()) : it->get<Int>();
}

std::string StringOr(const Json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

// The type a field of the start, finish and error events must have for the daemon to read it
// with value(key, default), which throws on another type (docs/trainer-run.md).
enum class Type {
  kString,
  kNumber,
  kObject,
  kCount,    // read as int: a number in [0, INT_MAX]
  kBytes,    // read as int64: a number in [0, INT64_MAX]
  kInteger,  // an integer of any size: the seed (uint64)
  kSha256,   // 64 lowercase hex digits: it names a release file
};

struct Field {
  const char* key;
  Type type;
};

bool HasType(const Json& value, Type type) {
  switch (type) {
    case Type::kString:
      return value.is_string();
    case Type::kNumber:
      return value.is_number();
    case Type::kObject:
      return value.is_object();
    case Type::kCount:
      return IsCount(value, std::numeric_limits<int>::max());
    case Type::kBytes:
      return IsCount(value, std::numeric_limits<std::int64_t>::max());
    case Type::kInteger:
      return value.is_number_integer();
    case Type::kSha256: {
      if (!value.is_string()) return false;
      const std::string& hex = value.get_ref<const std::string&>();
      return hex.size() == 64 && hex.find_first_not_of("0123456789abcdef") == std::string::npos;
    }
  }
  return false;
}

// Removes the fields of `object` that `fields` gives another type (null included: value()
// throws on it too) and returns their dotted names after `prefix`.
std::string DropMistyped(Json& object, std::initializer_list<Field> fields,
                         const std::string& prefix = "") {
  std::string dropped;
  for (const Field& field : fields) {
    auto it = object.find(field.key);
    if (it == object.end() || HasType(*it, field.type)) continue;
    object.erase(it);
    dropped += (dropped.empty() ? "" : ", ") + prefix + field.key;
  }
  return dropped;
}

std::string Join(const std::string& a, const std::string& b) {
  return a.empty() ? b : b.empty() ? a : a + ", " + b;
}

// The start, finish or error event as the daemon reads it: every field it reads either
// absent or of its documented type. Returns the names of the fields dropped.
std::string Normalize(const std::string& kind, Json& event) {
  if (kind == "start") {
    std::string dropped = DropMistyped(event, {{"software", Type::kObject},
                                               {"data", Type::kObject},
                                               {"effective_batch", Type::kCount},
                                               {"updates", Type::kCount},
                                               {"resumed_from_update", Type::kCount},
                                               {"seed", Type::kInteger}});
    if (event.contains("software")) {
      dropped = Join(dropped, DropMistyped(event["software"],
                                           {{"torch_version", Type::kString},
                                            {"blas", Type::kString},
                                            {"compiler", Type::kString}},
                                           "software."));
    }
    if (event.contains("data")) {
      dropped =
          Join(dropped, DropMistyped(event["data"], {{"fingerprint", Type::kString}}, "data."));
    }
    return dropped;
  }
  if (kind == "finish") {
    // samples_per_second, tokens_per_second, mfu and final_train_loss may be null and are
    // read as "a number or nothing".
    std::string dropped = DropMistyped(event, {{"throughput_method", Type::kString},
                                               {"elapsed_seconds", Type::kNumber},
                                               {"peak_bytes", Type::kBytes},
                                               {"updates", Type::kCount},
                                               {"model_path", Type::kString},
                                               {"model_sha256", Type::kSha256}});
    if (event.contains("model_files")) {
      dropped = Join(dropped, DropMistyped(event["model_files"],
                                           {{"weights", Type::kString},
                                            {"weights_sha256", Type::kSha256},
                                            {"description", Type::kString}},
                                           "model_files."));
    }
    return dropped;
  }
  if (kind == "error") {
    return DropMistyped(event, {{"kind", Type::kString}, {"message", Type::kString}});
  }
  return "";
}

}  // namespace

void WorkerReport::Consume(const std::string& line, double now) {
  Json event = Json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!event.is_object() || !event.contains("event") || !event["event"].is_string()) return;
  const std::string kind = event["event"];
  const std::string original = event.dump();
  if (const std::string dropped = Normalize(kind, event); !dropped.empty()) {
    events_.push_back(
        {0, now, std::nullopt, "worker_protocol", store::Severity::kWarning,
         "the worker's " + kind + " event has fields of the wrong type, ignored: " + dropped,
         original});
  }
  if (kind == "start") {
    start_ = event;
    updates_ = CountOr(event, "updates", 0);
    updates_done_ = CountOr(event, "resumed_from_update", 0);
  } else if (kind == "update") {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    store::UpdateMetric m;
    updates_done_ = CountOr(event, "update", 0);
    m.update = updates_done_;
    m.loss = NumberOr(event, "loss", nan);
    m.learning_rate = NumberOr(event, "lr", nan);
    m.grad_norm = NumberOr(event, "grad_norm", nan);
    m.samples_per_second = NumberOr(event, "samples_per_second", nan);
    m.live_bytes = CountOr(event, "live_bytes", std::int64_t{0});
    metrics_.push_back(m);
    eta_seconds_ = NumberOr(event, "eta_seconds", 0);
  } else if (kind == "eval") {
    const std::int64_t update = CountOr(event, "update", 0);
    const auto initial = event.find("initial");
    const bool of_initial_weights = initial != event.end() && *initial == true;
    const auto slices = event.find("slices");
    if (slices == event.end() || !slices->is_array()) return;
    for (const Json& slice : *slices) {
      if (!slice.is_object() || !slice.contains("name") || !slice["name"].is_string()) continue;
      const double loss = NumberOr(slice, "loss", std::numeric_limits<double>::quiet_NaN());
      evals_.push_back({slice["name"].get<std::string>(), update, loss});
      if (of_initial_weights) initial_losses_[slice["name"].get<std::string>()] = loss;
    }
  } else if (kind == "finish") {
    finish_ = event;
  } else if (kind == "checkpoint") {
    last_checkpoint_update_ = CountOr(event, "update", 0);
    events_.push_back({0, now, std::nullopt, "worker_checkpoint", store::Severity::kInfo,
                       "training checkpoint at update " + std::to_string(*last_checkpoint_update_) +
                           " (" + StringOr(event, "reason") + ")",
                       original});
  } else if (kind == "warning") {
    events_.push_back({0, now, std::nullopt, "worker_warning", store::Severity::kWarning,
                       StringOr(event, "message"), original});
  } else if (kind == "error") {
    error_ = event;
    events_.push_back({0, now, std::nullopt, "worker_error", store::Severity::kError,
                       StringOr(event, "kind") + ": " + StringOr(event, "message"), original});
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
