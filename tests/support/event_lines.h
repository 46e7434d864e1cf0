// trainer-run's stdout (JSON lines) as events.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace trainerd::testing {

inline std::vector<nlohmann::json> Events(const std::vector<std::string>& lines) {
  std::vector<nlohmann::json> events;
  for (const auto& line : lines) events.push_back(nlohmann::json::parse(line));
  return events;
}

}  // namespace trainerd::testing
