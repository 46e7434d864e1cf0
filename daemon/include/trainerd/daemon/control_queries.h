// The control protocol's requests and the read-only answers both sides compute from the run
// store: the daemon for requests on its socket, trainerctl straight from the database when
// the daemon is down. One JSON shape per record, with stable field names, bytes and seconds
// (docs/operations.md, "Control socket").
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "trainerd/common/status.h"
#include "trainerd/store/store.h"

namespace trainerd::daemon {

// A request is one line of JSON of at most this many bytes: {"command": "...", ...}.
inline constexpr std::size_t kMaxRequestBytes = 16 * 1024 * 1024;  // an outcome import's lines

// Error codes of {"ok": false, "error": {"code": ..., "message": ...}}.
inline constexpr const char* kBadRequest = "bad_request";     // malformed, oversized, unknown
inline constexpr const char* kNotFound = "not_found";         // no such run or version
inline constexpr const char* kUnauthorized = "unauthorized";  // peer credentials refused
inline constexpr const char* kConflict = "conflict";          // e.g. run-now during a run
inline constexpr const char* kInternalError = "internal";     // the store failed

// One request line as the control socket reads it, without its newline: a JSON object with a
// string "command", at most kMaxRequestBytes. Otherwise InvalidArgument with the message of
// the bad_request answer.
Result<nlohmann::json> ParseControlRequest(std::string_view line);

nlohmann::json Ok(nlohmann::json result);
nlohmann::json Error(const std::string& code, const std::string& message);

nlohmann::json RunJson(const store::RunRecord& run);
nlohmann::json ConfigJson(const store::ConfigVersion& version);
nlohmann::json ReleaseJson(const store::Release& release);
nlohmann::json EventJson(const store::Event& event);
// Sets `into`'s "outcomes" (the release's outcomes by slice and metric: value, count,
// first_at, last_at) and "previous_outcomes" (the same of the release it replaced; empty for
// the first release).
void AddOutcomesJson(store::Store& store, const store::Release& release, nlohmann::json* into);
// Sets `into`'s "release" to run `run_id`'s release (null when it released none), with
// AddOutcomesJson's fields beside it.
Status AddRunReleaseJson(store::Store& store, std::int64_t run_id, nlohmann::json* into);

// The config version the next cycle would run: the job file's version unless it is bad or
// unreadable (state "new" when the file changed since the last cycle), else the last
// known-good version. Empty object when there is none.
nlohmann::json ActiveConfigJson(store::Store& store, const std::string& job_path);

// Answers the read-only commands from the store: "runs" {limit}, "show" {run} (the run, its
// events and evals, and its release with its outcomes), "report" {run}
// (the report's facts and its HTML page, run_report.h), "configs", "release" {action: show,
// release} (the release, its run and its final eval loss by slice, its outcomes and those of
// the release it replaced),
// and the stored part of "status" (active config, last known-good, current release, last
// run). Anything else is a bad_request.
nlohmann::json AnswerFromStore(store::Store& store, const std::string& job_path,
                               const nlohmann::json& request);

}  // namespace trainerd::daemon
