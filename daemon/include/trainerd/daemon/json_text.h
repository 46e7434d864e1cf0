// Values of the control protocol's JSON (bytes, seconds, Unix times, numbers) as text for a
// person, "-" where the value is absent or null: what trainerctl's tables and the report page
// print; and a figure that may be absent as that JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace trainerd::daemon {

// `value` through printf `format` (one double conversion).
std::string NumberText(const nlohmann::json& value, const char* format);
// Bytes as "63.35 MiB".
std::string BytesText(const nlohmann::json& value);
// Unix seconds as "2026-12-02T03:10:44Z".
std::string TimeText(const nlohmann::json& value);

// `value`, or null where it is absent or not finite (JSON has no inf or NaN).
nlohmann::json FigureJson(const std::optional<double>& value);

}  // namespace trainerd::daemon
