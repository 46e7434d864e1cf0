// Values of the control protocol's JSON (bytes, seconds, Unix times, numbers) as text for a
// person, "-" where the value is absent or null: what trainerctl's tables and the report page
// print.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace trainerd::daemon {

// `value` through printf `format` (one double conversion).
std::string NumberText(const nlohmann::json& value, const char* format);
// Bytes as "63.35 MiB".
std::string BytesText(const nlohmann::json& value);
// Unix seconds as "2026-12-02T03:10:44Z".
std::string TimeText(const nlohmann::json& value);

}  // namespace trainerd::daemon
