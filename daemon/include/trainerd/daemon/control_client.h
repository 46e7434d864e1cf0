// trainerctl's side of the control socket: one request, one JSON line back.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "trainerd/common/status.h"

namespace trainerd::daemon {

// Sends `request` to the daemon on `socket_path` and returns its response object.
// NotFound when no daemon listens there (no socket file, or connection refused);
// IOError for anything else (permission denied, a timeout after `timeout_seconds`).
Result<nlohmann::json> SendControlRequest(const std::string& socket_path,
                                          const nlohmann::json& request, int timeout_seconds = 30);

}  // namespace trainerd::daemon
