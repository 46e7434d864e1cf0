#include "trainerd/daemon/operator_commands.h"

#include <map>

#include "trainerd/daemon/control_queries.h"
#include "trainerd/daemon/current_release.h"
#include "trainerd/daemon/event_log.h"
#include "trainerd/daemon/outcome_lines.h"
#include "trainerd/daemon/policy.h"
#include "trainerd/daemon/schedule.h"

namespace trainerd::daemon {
namespace {

// "outcomes.csv:12", or the source alone for an outcome without a line.
std::string SourceLine(const std::string& source, std::int64_t line) {
  return line > 0 ? source + ":" + std::to_string(line) : source;
}

}  // namespace

OperatorCommands::OperatorCommands(const DaemonConfig& config, store::Store& store,
                                   FileStore& files, const Clock& clock, DaemonMetrics* metrics,
                                   OutcomeWatch& outcome_watch)
    : config_(config),
      store_(store),
      files_(files),
      clock_(clock),
      metrics_(metrics),
      outcome_watch_(outcome_watch) {}

bool OperatorCommands::Handles(const std::string& command) {
  return command == "rollback" || command == "outcome" || command == "release";
}

nlohmann::json OperatorCommands::Handle(const nlohmann::json& request) {
  const std::string command = request.value("command", "");
  if (command == "rollback") return Rollback(request);
  if (command == "outcome") return RecordOutcomes(request);
  if (command == "release") return ReleaseCommand(request);
  return Error(kBadRequest, "unknown command '" + command + "'");
}

nlohmann::json OperatorCommands::Rollback(const nlohmann::json& request) {
  if (request.contains("model") && !request["model"].is_boolean()) {
    return Error(kBadRequest, "rollback: model must be true or false");
  }
  return request.value("model", false) ? RollbackModel(request) : RollbackConfig(request);
}

// The model: back to the newest gate-passed release older than the current one that was not
// withdrawn, or to the release given; releases/current follows.
nlohmann::json OperatorCommands::RollbackModel(const nlohmann::json& request) {
  const double now = clock_.Now();
  Result<std::vector<store::Release>> releases = store_.ListReleases(10000);
  if (!releases.ok()) return Error(kInternalError, "cannot read releases");
  std::optional<std::int64_t> target;
  if (request.contains("release")) {
    if (!request["release"].is_number_integer()) {
      return Error(kBadRequest, "rollback: release must be an integer id");
    }
    target = request["release"].get<std::int64_t>();
  } else {
    target = ModelRollbackTarget(*releases);
    if (!target) return Error(kNotFound, "no earlier released model to roll back to");
  }
  if (Status s = store_.SetCurrentRelease(*target, now); !s.ok()) {
    return Error(s.code() == Status::Code::kNotFound ? kNotFound : kConflict, s.message());
  }
  if (Status s = SyncCurrentReleaseLink(store_, files_, config_.state_dir); !s.ok()) {
    RecordAndLog(store_,
                 {0, now, std::nullopt, "release_link_failed", store::Severity::kError,
                  "releases/current still names the previous release: " + s.message(), "{}"});
  }
  RecordAndLog(store_, {0, now, std::nullopt, "model_rollback", store::Severity::kWarning,
                        "operator made release " + std::to_string(*target) + " current",
                        nlohmann::json{{"release", *target}}.dump()});
  return Ok({{"current_release", *target}});
}

// The config: pin a version as the active known-good one, and mark the job file's newer
// version bad so that the next cycle runs the pinned one.
nlohmann::json OperatorCommands::RollbackConfig(const nlohmann::json& request) {
  const double now = clock_.Now();
  const nlohmann::json active = ActiveConfigJson(store_, config_.job_path);
  std::string target;
  if (request.contains("to")) {
    if (!request["to"].is_string() || request["to"].get<std::string>().size() < 4) {
      return Error(kBadRequest, "rollback: to must be a config hash or a prefix of 4+ characters");
    }
    const std::string prefix = request["to"];
    Result<std::vector<store::ConfigVersion>> versions = store_.ListConfigVersions();
    if (!versions.ok()) return Error(kInternalError, versions.status().message());
    for (const store::ConfigVersion& v : *versions) {
      if (v.hash.rfind(prefix, 0) != 0) continue;
      if (!target.empty()) return Error(kBadRequest, "rollback: '" + prefix + "' is ambiguous");
      target = v.hash;
    }
    if (target.empty()) return Error(kNotFound, "no config version " + prefix);
  } else {
    Result<std::vector<store::ConfigVersion>> versions = store_.ListConfigVersions();
    if (!versions.ok()) return Error(kInternalError, versions.status().message());
    for (const store::ConfigVersion& v : *versions) {  // newest first
      if (v.state == store::ConfigState::kKnownGood && v.hash != active.value("hash", "")) {
        target = v.hash;
        break;
      }
    }
    if (target.empty()) return Error(kNotFound, "no other known-good config version");
  }
  const std::string reason = "rolled back by an operator to " + target.substr(0, 12);
  // The rollback is the two states: a store that refuses either has rolled nothing back.
  if (active.contains("hash") && active["hash"] != target) {
    if (Status s = store_.SetConfigState({active["hash"], store::ConfigState::kBad, reason, now});
        !s.ok()) {
      return Error(kInternalError, "rollback: " + s.message());
    }
  }
  if (Status s = store_.SetConfigState({target, store::ConfigState::kKnownGood, reason, now});
      !s.ok()) {
    return Error(kInternalError, "rollback: " + s.message());
  }
  RecordAndLog(
      store_,
      {0, now, std::nullopt, "rollback", store::Severity::kWarning, reason,
       nlohmann::json{{"from", active.value("hash", "")}, {"to", target}, {"reason", "operator"}}
           .dump()});
  if (metrics_) metrics_->Rollback("operator");
  return Ok({{"active_config", target}});
}

Result<store::Release> OperatorCommands::OutcomeRelease(const std::string& name) {
  if (name.size() < 12) {  // an id (OutcomeLineFromJson allows nothing else this short)
    Result<store::Release> release = store_.GetRelease(std::stoll(name));
    if (!release.ok() && release.status().code() == Status::Code::kNotFound) {
      return Status::NotFound("release " + name + " is unknown");
    }
    return release;
  }
  Result<std::vector<store::Release>> found = store_.FindReleasesByArtifact(name);
  if (!found.ok()) return found.status();
  for (const store::Release& r : *found) {  // newest first
    if (r.artifact_hash != found->front().artifact_hash) {
      return Status::InvalidArgument("model hash " + name + " starts more than one model's");
    }
  }
  for (const store::Release& r : *found) {
    if (r.live_at) return r;
  }
  if (!found->empty()) return found->front();
  return Status::NotFound("no release holds a model whose sha256 starts with " + name);
}

// trainerctl outcome add / import: every line checked and resolved, then stored in one
// transaction; a bad line refuses them all, naming it.
nlohmann::json OperatorCommands::RecordOutcomes(const nlohmann::json& request) {
  const double now = clock_.Now();
  const nlohmann::json& items = request.contains("outcomes") ? request["outcomes"] : nullptr;
  if (!items.is_array() || items.empty()) {
    return Error(kBadRequest, "outcome: outcomes must be a list of one or more outcomes");
  }
  if (request.contains("source") &&
      (!request["source"].is_string() || request["source"].get<std::string>().size() > 1024)) {
    return Error(kBadRequest, "outcome: source must be a string of at most 1024 bytes");
  }
  const std::string source = request.value("source", "outcome");
  std::vector<store::Outcome> outcomes;
  std::vector<std::int64_t> line_numbers;          // of each outcome in its source; 0: none
  std::map<std::string, store::Release> resolved;  // by the name the lines give
  for (const nlohmann::json& item : items) {
    const nlohmann::json line_json =
        item.is_object() ? item.value("line", nlohmann::json()) : nlohmann::json();
    const std::int64_t line_number =
        line_json.is_number_integer() ? line_json.get<std::int64_t>() : 0;
    const std::string where = SourceLine(source, line_number);
    Result<OutcomeLine> line = OutcomeLineFromJson(item, where);
    if (!line.ok()) return Error(kBadRequest, line.status().message());
    auto known = resolved.find(line->release);
    Result<store::Release> release = known != resolved.end() ? Result<store::Release>(known->second)
                                                             : OutcomeRelease(line->release);
    if (!release.ok()) {
      return Error(
          release.status().code() == Status::Code::kInternal ? kInternalError : kBadRequest,
          where + ": " + release.status().message());
    }
    resolved.emplace(line->release, *release);
    const std::string name = "release " + std::to_string(release->id);
    if (!release->live_at) {
      return Error(kBadRequest, where + ": " + name +
                                    " never went live (its gate withheld it), so it has no "
                                    "outcomes");
    }
    // A line without a time takes the time it arrives, a microsecond apart from the others
    // of the import so that two such lines are two outcomes.
    const double at = line->at.value_or(now + 1e-6 * static_cast<double>(outcomes.size()));
    if (at < *release->live_at) {
      return Error(kBadRequest, where + ": at " + FormatUtc(at) + " is before " + name +
                                    " went live (" + FormatUtc(*release->live_at) + ")");
    }
    if (at > now + 300) {
      return Error(kBadRequest, where + ": at " + FormatUtc(at) + " is in the future");
    }
    outcomes.push_back({release->id, line->slice, line->metric, at, line->value, line->count});
    line_numbers.push_back(line_number);
  }
  Result<std::int64_t> added = store_.RecordOutcomes(
      outcomes, [&](std::size_t i) { return SourceLine(source, line_numbers[i]); });
  if (!added.ok()) {
    return Error(
        added.status().code() == Status::Code::kInvalidArgument ? kBadRequest : kInternalError,
        added.status().message());
  }
  RecordAndLog(
      store_,
      {0, now, std::nullopt, "outcomes_recorded", store::Severity::kInfo,
       std::to_string(*added) + " outcomes recorded from " + source + " (" +
           std::to_string(outcomes.size() - *added) + " already stored)",
       nlohmann::json{{"source", source}, {"added", *added}, {"lines", outcomes.size()}}.dump()});
  return Ok({{"added", *added}, {"already_stored", outcomes.size() - *added}});
}

// trainerctl release pin|unpin|show ID.
nlohmann::json OperatorCommands::ReleaseCommand(const nlohmann::json& request) {
  const nlohmann::json action_json = request.value("action", nlohmann::json());
  const std::string action = action_json.is_string() ? action_json.get<std::string>() : "";
  if (action == "show") {
    nlohmann::json answer = AnswerFromStore(store_, config_.job_path, request);
    if (!answer.value("ok", false) || !answer["result"]["release"].value("current", false)) {
      return answer;
    }
    if (Result<std::optional<OutcomeVerdict>> verdict = outcome_watch_.Verdict();
        verdict.ok() && *verdict) {
      answer["result"]["verdict"] = ToJson(**verdict);
    }
    return answer;
  }
  if (action != "pin" && action != "unpin") {
    return Error(kBadRequest, "release: action must be pin, unpin or show");
  }
  if (!request.contains("release") || !request["release"].is_number_integer()) {
    return Error(kBadRequest, "release: release must be an integer id");
  }
  const std::int64_t id = request["release"];
  if (Status s = store_.SetReleasePinned(id, action == "pin"); !s.ok()) {
    return Error(s.code() == Status::Code::kNotFound ? kNotFound : kInternalError, s.message());
  }
  RecordAndLog(store_,
               {0, clock_.Now(), std::nullopt, "release_" + action + "ned", store::Severity::kInfo,
                "operator " + action + "ned release " + std::to_string(id) +
                    (action == "pin" ? ": its outcomes never roll it back"
                                     : ": its outcomes may roll it back again"),
                nlohmann::json{{"release", id}}.dump()});
  Result<store::Release> release = store_.GetRelease(id);
  if (!release.ok()) return Error(kInternalError, release.status().message());
  return Ok(ReleaseJson(*release));
}

}  // namespace trainerd::daemon
