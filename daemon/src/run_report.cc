#include "trainerd/daemon/run_report.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "trainerd/common/atomic_file.h"
#include "trainerd/daemon/control_queries.h"
#include "trainerd/daemon/report_page.h"

namespace trainerd::daemon {

namespace {

nlohmann::json Finite(double value) {
  return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(nullptr);
}

// At most kMaxReportUpdates metrics, evenly spaced over the run, the last one kept: the
// curves keep their shape and the page its size whatever the number of updates.
nlohmann::json UpdatesJson(const std::vector<store::UpdateMetric>& metrics) {
  nlohmann::json updates = nlohmann::json::array();
  const std::size_t n = metrics.size();
  const std::size_t stride = (n + kMaxReportUpdates - 1) / kMaxReportUpdates;
  for (std::size_t i = 0; i < n; i += std::max<std::size_t>(stride, 1)) {
    const std::size_t at = i + stride >= n ? n - 1 : i;  // the last stride ends at the last
    const store::UpdateMetric& m = metrics[at];
    updates.push_back({{"update", m.update},
                       {"loss", Finite(m.loss)},
                       {"learning_rate", Finite(m.learning_rate)},
                       {"grad_norm", Finite(m.grad_norm)},
                       {"samples_per_second", Finite(m.samples_per_second)},
                       {"live_bytes", m.live_bytes}});
    if (at == n - 1) break;
  }
  return updates;
}

// The runs linked to `run` by fallback_of, oldest first: the attempts of its night.
std::vector<store::RunRecord> Chain(const store::RunRecord& run,
                                    const std::vector<store::RunRecord>& recent) {
  std::map<std::int64_t, const store::RunRecord*> by_id;
  std::map<std::int64_t, const store::RunRecord*> replaced_by;
  for (const store::RunRecord& r : recent) {
    by_id[r.id] = &r;
    if (r.fallback_of) replaced_by[*r.fallback_of] = &r;
  }
  const store::RunRecord* first = &run;
  while (first->fallback_of && by_id.count(*first->fallback_of)) {
    first = by_id[*first->fallback_of];
  }
  std::vector<store::RunRecord> chain;
  for (const store::RunRecord* r = first; r != nullptr;) {
    chain.push_back(r->id == run.id ? run : *r);
    auto next = replaced_by.find(r->id);
    r = next == replaced_by.end() ? nullptr : next->second;
  }
  return chain;
}

// A run of the night with the event that ended it, when it failed: its cause for a person.
nlohmann::json NightRunJson(store::Store& store, const store::RunRecord& run) {
  nlohmann::json j = {
      {"id", run.id},
      {"status", std::string(store::ToString(run.status))},
      {"config_hash", run.config_hash},
      {"fallback_of", run.fallback_of ? nlohmann::json(*run.fallback_of) : nlohmann::json(nullptr)},
      {"plan", run.plan ? ToJson(*run.plan) : nlohmann::json(nullptr)},
      {"plan_source", nullptr},
      {"cause", nullptr}};
  Result<std::vector<store::Event>> events = store.GetRunEvents(run.id);
  if (!events.ok()) return j;
  for (const store::Event& e : *events) {
    if (e.kind == "run_started") {
      nlohmann::json details = nlohmann::json::parse(e.details_json, nullptr, false);
      if (details.is_object()) j["plan_source"] = details.value("plan_source", "");
    }
    if (e.severity == store::Severity::kError && j["cause"].is_null()) j["cause"] = e.message;
  }
  return j;
}

}  // namespace

Result<nlohmann::json> GatherRunReport(store::Store& store, std::int64_t run_id, double now) {
  Result<store::RunRecord> run = store.GetRun(run_id);
  if (!run.ok()) return run.status();
  nlohmann::json report = {{"run", RunJson(*run)},
                           {"events", nlohmann::json::array()},
                           {"slice_evals", nlohmann::json::array()},
                           {"updates", nlohmann::json::array()},
                           {"updates_recorded", 0},
                           {"night", nlohmann::json::array()},
                           {"release", nullptr},
                           {"generated_at", now}};
  Result<std::vector<store::Event>> events = store.GetRunEvents(run_id);
  if (!events.ok()) return events.status();
  for (const store::Event& e : *events) report["events"].push_back(EventJson(e));
  Result<std::vector<store::SliceEval>> evals = store.GetSliceEvals(run_id);
  if (!evals.ok()) return evals.status();
  for (const store::SliceEval& s : *evals) {
    report["slice_evals"].push_back(
        {{"slice", s.slice}, {"update", s.update}, {"loss", Finite(s.loss)}});
  }
  Result<std::vector<store::UpdateMetric>> metrics = store.GetMetrics(run_id);
  if (!metrics.ok()) return metrics.status();
  report["updates"] = UpdatesJson(*metrics);
  report["updates_recorded"] = metrics->size();
  Result<std::vector<store::RunRecord>> recent = store.ListRecentRuns(200);
  if (!recent.ok()) return recent.status();
  for (const store::RunRecord& r : Chain(*run, *recent)) {
    report["night"].push_back(NightRunJson(store, r));
  }
  if (Status s = AddRunReleaseJson(store, run_id, &report); !s.ok()) return s;
  return report;
}

Status WriteRunReport(store::Store& store, std::int64_t run_id, double now,
                      const std::string& path) {
  Result<nlohmann::json> facts = GatherRunReport(store, run_id, now);
  if (!facts.ok()) return facts.status();
  return WriteFileAtomically(path, RenderReportPage(*facts));
}

}  // namespace trainerd::daemon
