#include "trainerd/daemon/control_queries.h"

#include <chrono>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include "trainerd/common/json_input.h"
#include "trainerd/common/sha256.h"
#include "trainerd/daemon/eval_noise.h"
#include "trainerd/daemon/json_text.h"
#include "trainerd/daemon/policy.h"
#include "trainerd/daemon/report_page.h"
#include "trainerd/daemon/run_report.h"

namespace trainerd::daemon {

namespace {

nlohmann::json ParsedOrText(const std::string& json_text) {
  nlohmann::json j = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  return j.is_discarded() ? nlohmann::json(json_text) : j;
}

}  // namespace

Result<nlohmann::json> ParseControlRequest(std::string_view line) {
  if (line.size() > kMaxRequestBytes) {
    return Status::InvalidArgument("request longer than " + std::to_string(kMaxRequestBytes) +
                                   " bytes");
  }
  nlohmann::json request = ParseBoundedJson(line);
  if (!request.is_object() || !request.contains("command") || !request["command"].is_string()) {
    return Status::InvalidArgument("expected one JSON object per line with a \"command\"");
  }
  return request;
}

nlohmann::json Ok(nlohmann::json result) { return {{"ok", true}, {"result", std::move(result)}}; }

nlohmann::json Error(const std::string& code, const std::string& message) {
  return {{"ok", false}, {"error", {{"code", code}, {"message", message}}}};
}

nlohmann::json RunJson(const store::RunRecord& run) {
  nlohmann::json j = {
      {"id", run.id},
      {"config_hash", run.config_hash},
      {"fallback_of", run.fallback_of ? nlohmann::json(*run.fallback_of) : nullptr},
      {"status", std::string(store::ToString(run.status))},
      {"created_at", run.created_at},
      {"started_at", FigureJson(run.started_at)},
      {"ended_at", FigureJson(run.ended_at)},
      {"deadline_at", run.deadline_at},
      {"plan", run.plan ? ToJson(*run.plan) : nlohmann::json(nullptr)},
      {"hardware",
       {{"cpu_model", run.hardware.cpu_model},
        {"cpu_cores", run.hardware.cpu_cores},
        {"isa", run.hardware.isa},
        {"memory_bytes", run.hardware.memory_bytes},
        {"device", run.hardware.device},
        {"device_memory_bytes", run.hardware.device_memory_bytes}}},
      {"software",
       {{"trainerd_version", run.software.trainerd_version},
        {"libtorch_version", run.software.libtorch_version},
        {"blas", run.software.blas},
        {"compiler", run.software.compiler}}},
      {"shapes", ParsedOrText(run.shapes_json)},
      {"seeds", ParsedOrText(run.seeds_json)},
      {"data_fingerprint", run.data_fingerprint},
      {"throughput_method", run.throughput_method},
      {"samples_per_second", FigureJson(run.samples_per_second)},
      {"world_size", run.world_size},
      {"samples_per_second_per_rank", run.samples_per_second
                                          ? nlohmann::json(*run.samples_per_second / run.world_size)
                                          : nlohmann::json(nullptr)},
      {"tokens_per_second", FigureJson(run.tokens_per_second)},
      {"mfu", FigureJson(run.mfu)},
      {"cost_per_sample", FigureJson(run.cost_per_sample)},
      {"final_loss", FigureJson(run.final_loss)},
      {"parity_seconds", FigureJson(run.parity_seconds)},
      {"peak_memory_bytes", nullptr},
      {"storage_bytes", run.storage_bytes ? nlohmann::json(*run.storage_bytes) : nullptr},
      {"state_dir_bytes", run.state_dir_bytes ? nlohmann::json(*run.state_dir_bytes) : nullptr},
      {"data_quality", run.data_quality_json.empty() ? nlohmann::json(nullptr)
                                                     : ParsedOrText(run.data_quality_json)},
  };
  if (run.peak_memory) {
    j["peak_memory_bytes"] = nlohmann::json::object();
    for (const auto& [category, bytes] : store::NamedCategories(*run.peak_memory)) {
      j["peak_memory_bytes"][std::string(category)] = bytes;
    }
  }
  return j;
}

nlohmann::json ConfigJson(const store::ConfigVersion& version) {
  return {{"hash", version.hash},
          {"state", std::string(store::ToString(version.state))},
          {"first_seen", version.first_seen}};
}

nlohmann::json ReleaseJson(const store::Release& release) {
  return {{"id", release.id},
          {"run_id", release.run_id},
          {"artifact_path", release.artifact_path},
          {"artifact_sha256", release.artifact_hash},
          {"gate_passed", release.gate_passed},
          {"gate", ParsedOrText(release.gate_details_json)},
          {"created_at", release.created_at},
          {"current", release.current},
          {"live_at", release.live_at ? nlohmann::json(*release.live_at) : nullptr},
          {"previous_release",
           release.previous_release_id ? nlohmann::json(*release.previous_release_id) : nullptr},
          {"pinned", release.pinned},
          {"withdrawn", release.withdrawn_json ? ParsedOrText(*release.withdrawn_json)
                                               : nlohmann::json(nullptr)},
          {"files_removed_at",
           release.files_removed_at ? nlohmann::json(*release.files_removed_at) : nullptr}};
}

namespace {

nlohmann::json OutcomeTotalsJson(store::Store& store, std::int64_t release_id) {
  nlohmann::json list = nlohmann::json::array();
  Result<std::vector<store::OutcomeTotal>> totals =
      store.GetOutcomeTotals(release_id, std::numeric_limits<double>::infinity());
  for (const store::OutcomeTotal& t : totals.ok() ? *totals : std::vector<store::OutcomeTotal>{}) {
    list.push_back({{"slice", t.slice},
                    {"metric", t.metric},
                    {"value", t.value},
                    {"count", t.count},
                    {"first_at", t.first_at},
                    {"last_at", t.last_at}});
  }
  return list;
}

}  // namespace

void AddOutcomesJson(store::Store& store, const store::Release& release, nlohmann::json* into) {
  (*into)["outcomes"] = OutcomeTotalsJson(store, release.id);
  (*into)["previous_outcomes"] = release.previous_release_id
                                     ? OutcomeTotalsJson(store, *release.previous_release_id)
                                     : nlohmann::json::array();
}

Status AddRunReleaseJson(store::Store& store, std::int64_t run_id, nlohmann::json* into) {
  (*into)["release"] = nullptr;
  Result<std::vector<store::Release>> releases = store.ListReleases(1'000'000);
  if (!releases.ok()) return releases.status();
  for (const store::Release& r : *releases) {
    if (r.run_id != run_id) continue;
    (*into)["release"] = ReleaseJson(r);
    AddOutcomesJson(store, r, into);
  }
  return Status::Ok();
}

nlohmann::json EventJson(const store::Event& event) {
  return {{"id", event.id},
          {"at", event.at},
          {"run_id", event.run_id ? nlohmann::json(*event.run_id) : nullptr},
          {"kind", event.kind},
          {"severity", std::string(store::ToString(event.severity))},
          {"message", event.message},
          {"details", ParsedOrText(event.details_json)}};
}

nlohmann::json ActiveConfigJson(store::Store& store, const std::string& job_path) {
  std::ifstream in(job_path, std::ios::binary);
  if (in) {
    std::ostringstream text;
    text << in.rdbuf();
    const std::string hash = Sha256Hex(text.str());
    Result<store::ConfigVersion> version = store.GetConfigVersion(hash);
    if (version.ok() && version->state != store::ConfigState::kBad) return ConfigJson(*version);
    // Edited since the last cycle: the next one records it as a candidate and runs it.
    if (!version.ok()) return {{"hash", hash}, {"state", "new"}, {"first_seen", nullptr}};
  }
  Result<std::optional<store::ConfigVersion>> good = store.LastKnownGoodConfig();
  return good.ok() && *good ? ConfigJson(**good) : nlohmann::json::object();
}

nlohmann::json AnswerFromStore(store::Store& store, const std::string& job_path,
                               const nlohmann::json& request) {
  const std::string command = request.value("command", "");
  if (command == "runs") {
    const nlohmann::json limit = request.value("limit", nlohmann::json(20));
    // Compared as JSON numbers: get<int>() would first wrap 4294967297 to 1.
    if (!limit.is_number_integer() || limit < 1 || limit > 10000) {
      return Error(kBadRequest, "runs: limit must be an integer in [1, 10000]");
    }
    Result<std::vector<store::RunRecord>> runs = store.ListRecentRuns(limit.get<int>());
    if (!runs.ok()) return Error(kInternalError, runs.status().message());
    nlohmann::json list = nlohmann::json::array();
    for (const store::RunRecord& run : *runs) list.push_back(RunJson(run));
    return Ok({{"runs", list}});
  }
  if (command == "report") {
    const nlohmann::json id = request.value("run", nlohmann::json());
    if (!id.is_number_integer()) return Error(kBadRequest, "report: run must be an integer id");
    const double now =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    Result<nlohmann::json> facts = GatherRunReport(store, id.get<std::int64_t>(), now);
    if (!facts.ok()) {
      return facts.status().code() == Status::Code::kNotFound
                 ? Error(kNotFound, "no run " + std::to_string(id.get<std::int64_t>()))
                 : Error(kInternalError, facts.status().message());
    }
    return Ok({{"report", *facts}, {"html", RenderReportPage(*facts)}});
  }
  if (command == "show") {
    const nlohmann::json id = request.value("run", nlohmann::json());
    if (!id.is_number_integer()) return Error(kBadRequest, "show: run must be an integer id");
    Result<store::RunRecord> run = store.GetRun(id.get<std::int64_t>());
    if (!run.ok()) {
      return run.status().code() == Status::Code::kNotFound
                 ? Error(kNotFound, "no run " + std::to_string(id.get<std::int64_t>()))
                 : Error(kInternalError, run.status().message());
    }
    nlohmann::json events = nlohmann::json::array();
    if (Result<std::vector<store::Event>> e = store.GetRunEvents(run->id); e.ok()) {
      for (const store::Event& event : *e) events.push_back(EventJson(event));
    }
    nlohmann::json evals = nlohmann::json::array();
    if (Result<std::vector<store::SliceEval>> e = store.GetSliceEvals(run->id); e.ok()) {
      for (const store::SliceEval& s : *e) {
        const std::optional<double> standard_error = StoredStandardError(s.windows_json);
        evals.push_back(
            {{"slice", s.slice},
             {"update", s.update},
             {"loss", std::isfinite(s.loss) ? nlohmann::json(s.loss) : nullptr},
             {"standard_error", standard_error ? nlohmann::json(*standard_error) : nullptr},
             {"baseline_loss", s.baseline_loss ? nlohmann::json(*s.baseline_loss) : nullptr},
             {"predictions", s.predictions_json.empty()
                                 ? nlohmann::json(nullptr)
                                 : nlohmann::json::parse(s.predictions_json, nullptr, false)}});
      }
    }
    std::size_t updates = 0;
    if (Result<std::vector<store::UpdateMetric>> m = store.GetMetrics(run->id); m.ok()) {
      updates = m->size();
    }
    nlohmann::json result = {{"run", RunJson(*run)},
                             {"events", events},
                             {"slice_evals", evals},
                             {"updates_recorded", updates}};
    if (Status s = AddRunReleaseJson(store, run->id, &result); !s.ok()) {
      return Error(kInternalError, s.message());
    }
    return Ok(result);
  }
  if (command == "release" && request.contains("action") && request["action"] == "show") {
    const nlohmann::json id = request.value("release", nlohmann::json());
    if (!id.is_number_integer())
      return Error(kBadRequest, "release: release must be an integer id");
    Result<store::Release> release = store.GetRelease(id.get<std::int64_t>());
    if (!release.ok()) {
      return release.status().code() == Status::Code::kNotFound
                 ? Error(kNotFound, "no release " + std::to_string(id.get<std::int64_t>()))
                 : Error(kInternalError, release.status().message());
    }
    nlohmann::json result = {{"release", ReleaseJson(*release)}};
    AddOutcomesJson(store, *release, &result);
    if (Result<store::RunRecord> run = store.GetRun(release->run_id); run.ok()) {
      result["run"] = RunJson(*run);
    }
    // The run's final eval loss by slice, what its gate judged.
    result["slice_losses"] = nlohmann::json::object();
    if (Result<std::vector<store::SliceEval>> evals = store.GetSliceEvals(release->run_id);
        evals.ok()) {
      for (const auto& [slice, loss] : FinalSliceLosses(*evals)) {
        result["slice_losses"][slice] = std::isfinite(loss) ? nlohmann::json(loss) : nullptr;
      }
    }
    return Ok(result);
  }
  if (command == "configs") {
    Result<std::vector<store::ConfigVersion>> versions = store.ListConfigVersions();
    if (!versions.ok()) return Error(kInternalError, versions.status().message());
    nlohmann::json list = nlohmann::json::array();
    for (const store::ConfigVersion& v : *versions) list.push_back(ConfigJson(v));
    return Ok({{"configs", list}, {"active", ActiveConfigJson(store, job_path)}});
  }
  if (command == "status") {
    nlohmann::json status = {{"active_config", ActiveConfigJson(store, job_path)},
                             {"last_known_good", nullptr},
                             {"current_release", nullptr},
                             {"last_run", nullptr}};
    if (Result<std::optional<store::ConfigVersion>> good = store.LastKnownGoodConfig();
        good.ok() && *good) {
      status["last_known_good"] = ConfigJson(**good);
    }
    if (Result<std::optional<store::Release>> release = store.CurrentRelease();
        release.ok() && *release) {
      status["current_release"] = ReleaseJson(**release);
    }
    if (Result<std::vector<store::RunRecord>> last = store.ListRecentRuns(1);
        last.ok() && !last->empty()) {
      status["last_run"] = RunJson(last->front());
    }
    return Ok(status);
  }
  return Error(kBadRequest, "unknown command '" + command + "'");
}

}  // namespace trainerd::daemon
