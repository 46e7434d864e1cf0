// trainerctl's human output: aligned tables, sizes in GiB/MiB, durations in h/m/s, times in
// UTC. Input: the `result` objects of the control protocol (control_queries.h).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace trainerd::daemon {

std::string FormatStatus(const nlohmann::json& status);
std::string FormatRuns(const nlohmann::json& runs);
std::string FormatShow(const nlohmann::json& show);
std::string FormatConfigs(const nlohmann::json& configs);
std::string FormatRelease(const nlohmann::json& release);

}  // namespace trainerd::daemon
