#include "trainerd/daemon/json_text.h"

#include <cmath>
#include <cstdio>

#include "trainerd/daemon/schedule.h"
#include "trainerd/trainer/spec/units.h"

namespace trainerd::daemon {

std::string NumberText(const nlohmann::json& value, const char* format) {
  if (!value.is_number()) return "-";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, format, value.get<double>());
  return buffer;
}

std::string BytesText(const nlohmann::json& value) {
  return value.is_number() ? FormatBytes(value.get<std::int64_t>()) : "-";
}

std::string TimeText(const nlohmann::json& value) {
  return value.is_number() ? FormatUtc(value.get<double>()) : "-";
}

nlohmann::json FigureJson(const std::optional<double>& value) {
  return value && std::isfinite(*value) ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

}  // namespace trainerd::daemon
