#include "trainerd/daemon/duration_forecast.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "trainerd/common/median.h"

namespace trainerd::daemon {
namespace {

std::string Factor(double factor) {
  char text[32];
  std::snprintf(text, sizeof(text), "x%.2f", factor);
  return text;
}

bool Positive(const nlohmann::json& value) {
  return value.is_number() && std::isfinite(value.get<double>()) && value.get<double>() > 0;
}

}  // namespace

double PlanTiming::PlanError() const { return planned_update_seconds / trained_update_seconds - 1; }

double PlanTiming::TimeModelError() const {
  return modelled_update_seconds > 0 ? modelled_update_seconds / trained_update_seconds - 1 : 0;
}

double PlanTiming::Ratio() const { return trained_update_seconds / planned_update_seconds; }

std::string PlanTiming::Describe() const {
  char text[200];
  std::snprintf(text, sizeof(text),
                "an update took %.3g s in training, the planner timed %.3g s (%+.0f%%)",
                trained_update_seconds, planned_update_seconds, PlanError() * 100);
  std::string out = text;
  if (modelled_update_seconds > 0) {
    std::snprintf(text, sizeof(text), ", its time model predicted %.3g s (%+.0f%%)",
                  modelled_update_seconds, TimeModelError() * 100);
    out += text;
  }
  return out;
}

std::string PlanTiming::ToJson() const {
  return nlohmann::json{{"modelled_update_seconds", modelled_update_seconds},
                        {"planned_update_seconds", planned_update_seconds},
                        {"trained_update_seconds", trained_update_seconds},
                        {"plan_error", PlanError()},
                        {"time_model_error", TimeModelError()}}
      .dump();
}

std::optional<PlanTiming> PlanTiming::FromJson(const std::string& json) {
  const nlohmann::json j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !Positive(j.value("planned_update_seconds", nlohmann::json())) ||
      !Positive(j.value("trained_update_seconds", nlohmann::json()))) {
    return std::nullopt;
  }
  PlanTiming t;
  t.planned_update_seconds = j["planned_update_seconds"].get<double>();
  t.trained_update_seconds = j["trained_update_seconds"].get<double>();
  if (Positive(j.value("modelled_update_seconds", nlohmann::json()))) {
    t.modelled_update_seconds = j["modelled_update_seconds"].get<double>();
  }
  return t;
}

DurationCorrection CorrectionFrom(const std::vector<PlanTiming>& newest_first) {
  std::vector<double> ratios;
  for (const PlanTiming& t : newest_first) {
    if (static_cast<int>(ratios.size()) == kCorrectionNights) break;
    ratios.push_back(t.Ratio());
  }
  DurationCorrection c;
  if (ratios.empty()) return c;
  c.nights = static_cast<int>(ratios.size());
  c.factor = Median(ratios);
  c.low = *std::min_element(ratios.begin(), ratios.end());
  c.high = *std::max_element(ratios.begin(), ratios.end());
  return c;
}

std::vector<PlanTiming> RecordedPlanTimings(store::Store& store,
                                            const store::HardwareFingerprint* hardware,
                                            int nights) {
  // Nights that reused a validated plan have no planner's figure: look further back.
  constexpr int kRunsLooked = 50;
  std::vector<PlanTiming> timings;
  Result<std::vector<store::RunRecord>> runs =
      store.ListRunsByStatus(store::RunStatus::kSucceeded, kRunsLooked);
  if (!runs.ok()) return timings;
  for (const store::RunRecord& run : *runs) {
    if (static_cast<int>(timings.size()) == nights) break;
    if (hardware && !(run.hardware == *hardware)) continue;
    Result<std::vector<store::Event>> events = store.GetRunEvents(run.id);
    if (!events.ok()) continue;
    for (const store::Event& e : *events) {
      if (e.kind != kPlanTimingEvent) continue;
      if (std::optional<PlanTiming> t = PlanTiming::FromJson(e.details_json)) timings.push_back(*t);
    }
  }
  return timings;
}

std::string DurationCorrection::ToJson() const {
  return nlohmann::json{{"nights", nights}, {"factor", factor}, {"low", low}, {"high", high}}
      .dump();
}

DurationCorrection DurationCorrection::FromJson(const std::string& json) {
  const nlohmann::json j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  DurationCorrection c;
  if (!j.is_object() || !j.value("nights", nlohmann::json()).is_number_integer() ||
      !Positive(j.value("factor", nlohmann::json())) ||
      !Positive(j.value("low", nlohmann::json())) || !Positive(j.value("high", nlohmann::json()))) {
    return c;
  }
  c.nights = j["nights"].get<int>();
  c.factor = j["factor"].get<double>();
  c.low = j["low"].get<double>();
  c.high = j["high"].get<double>();
  return c;
}

std::string DurationCorrection::Describe() const {
  if (nights == 0) return "";
  return Factor(factor) + " by the last " +
         (nights == 1 ? std::string("night") : std::to_string(nights) + " nights") +
         " on this hardware (" + Factor(low) + " to " + Factor(high) + ")";
}

}  // namespace trainerd::daemon
