#include "trainerd/daemon/retention.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include "trainerd/daemon/event_log.h"
#include "trainerd/daemon/policy.h"
#include "trainerd/daemon/release_folders.h"
#include "trainerd/daemon/state_layout.h"

namespace trainerd::daemon {
namespace {

namespace fs = std::filesystem;

// Bytes of the file or folder at `path` (0 when absent); links are not followed.
std::int64_t BytesAt(const fs::path& path) {
  std::error_code ec;
  const fs::file_status status = fs::symlink_status(path, ec);
  if (ec || !fs::exists(status)) return 0;
  if (fs::is_regular_file(status)) {
    const std::uintmax_t size = fs::file_size(path, ec);
    return ec ? 0 : static_cast<std::int64_t>(size);
  }
  if (!fs::is_directory(status)) return 0;
  std::int64_t total = 0;
  for (fs::recursive_directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_regular_file(ec) && !it->is_symlink(ec)) {
      total += static_cast<std::int64_t>(it->file_size(ec));
    }
  }
  return total;
}

}  // namespace

std::vector<std::int64_t> ReleasesToRemove(const std::vector<store::Release>& releases,
                                           int keep_newest) {
  std::vector<store::Release> newest_first = releases;
  std::sort(newest_first.begin(), newest_first.end(),
            [](const store::Release& a, const store::Release& b) { return a.id > b.id; });
  std::set<std::int64_t> kept;
  const auto current = std::find_if(newest_first.begin(), newest_first.end(),
                                    [](const store::Release& r) { return r.current; });
  if (current != newest_first.end()) {
    kept.insert(current->id);
    if (current->previous_release_id) kept.insert(*current->previous_release_id);
  }
  if (const std::optional<std::int64_t> target = ModelRollbackTarget(releases)) {
    kept.insert(*target);
  }
  std::vector<std::int64_t> removed;
  for (std::size_t i = 0; i < newest_first.size(); ++i) {
    const store::Release& r = newest_first[i];
    if (static_cast<int>(i) < keep_newest || r.pinned || kept.count(r.id) || r.files_removed_at) {
      continue;
    }
    removed.push_back(r.id);
  }
  std::sort(removed.begin(), removed.end());
  return removed;
}

Retention::Retention(const DaemonConfig& config, store::Store& store, FileStore& files,
                     const Clock& clock, DaemonMetrics* metrics)
    : config_(config), store_(store), files_(files), clock_(clock), metrics_(metrics) {}

void Retention::RemoveCounted(const std::string& path, RetentionReport* report) {
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(path, ec))) return;
  if (!StateLayout(config_.state_dir).Holds(path)) {
    report->paths_refused.push_back(path);
    return;
  }
  const std::int64_t bytes = BytesAt(path);
  files_.Remove(path);
  if (fs::exists(fs::symlink_status(path, ec))) return;  // not removed: nothing to count
  report->bytes_removed += bytes;
  report->files_removed.push_back(path);
}

Result<RetentionReport> Retention::Apply() {
  const double now = clock_.Now();
  const StateLayout layout(config_.state_dir);
  RetentionReport report;
  Result<std::vector<store::Release>> releases = store_.ListReleases(1'000'000);
  if (!releases.ok()) return releases.status();
  report.releases_removed = ReleasesToRemove(*releases, config_.retention.releases);
  // Recorded first: a kill between this and the removal leaves files no record names as
  // present, which the next pass removes.
  if (Status s = store_.MarkReleaseFilesRemoved(report.releases_removed, now); !s.ok()) return s;
  const std::set<std::int64_t> newly(report.releases_removed.begin(),
                                     report.releases_removed.end());
  std::set<std::int64_t> current_runs;
  for (const store::Release& r : *releases) {
    if (r.current) current_runs.insert(r.run_id);
    if (!r.files_removed_at && newly.count(r.id) == 0) continue;
    RemoveCounted(ReleaseFilesPath(r), &report);
  }
  Result<std::vector<store::RunRecord>> runs = store_.ListRecentRuns(1'000'000);
  if (!runs.ok()) return runs.status();
  const auto kept_files = [&](const store::RunRecord& run) {
    return run.created_at >= now - config_.retention.files_seconds || current_runs.count(run.id);
  };
  // A data profile is the reference of every night while its release is current, and the
  // same data gives many runs one profile: it goes when no kept run has its data.
  std::set<std::int64_t> kept_release_runs;  // a rollback may make any of them current
  for (const store::Release& r : *releases) {
    if (!r.files_removed_at && newly.count(r.id) == 0) kept_release_runs.insert(r.run_id);
  }
  std::set<std::string> kept_data;
  for (const store::RunRecord& run : *runs) {
    if (kept_files(run) || kept_release_runs.count(run.id)) kept_data.insert(run.data_fingerprint);
  }
  for (const store::RunRecord& run : *runs) {
    if (kept_files(run)) continue;
    for (const std::string& path :
         {layout.RunLog(run.id), layout.RunReport(run.id), layout.ProfileTrace(run.id)}) {
      RemoveCounted(path, &report);
    }
    if (!run.data_fingerprint.empty() && kept_data.count(run.data_fingerprint) == 0) {
      RemoveCounted(layout.DataProfile(run.data_fingerprint), &report);
    }
  }
  report.storage_bytes = BytesAt(config_.state_dir);
  if (!runs->empty()) {
    const std::int64_t newest = runs->front().id;
    report.night_bytes = BytesAt(layout.RunLog(newest)) + BytesAt(layout.RunReport(newest)) +
                         BytesAt(layout.ProfileTrace(newest)) +
                         (runs->front().data_fingerprint.empty()
                              ? 0
                              : BytesAt(layout.DataProfile(runs->front().data_fingerprint)));
    for (const store::Release& r : *releases) {
      if (r.run_id == newest && !r.files_removed_at && newly.count(r.id) == 0) {
        report.night_bytes += BytesAt(ReleaseFilesPath(r));
      }
    }
  }
  // The night's storage, recorded with its run once (a later start-up's pass leaves it).
  if (!runs->empty() && store::IsFinished(runs->front().status) && !runs->front().storage_bytes) {
    if (Status s = store_.SetRunStorage(runs->front().id, report.night_bytes, report.storage_bytes);
        !s.ok()) {
      return s;
    }
  }
  if (metrics_) metrics_->Storage(report.storage_bytes, report.night_bytes, report.bytes_removed);
  if (!report.paths_refused.empty()) {
    RecordAndLog(store_,
                 {0, now, std::nullopt, "retention_refused", store::Severity::kWarning,
                  "retention left " + std::to_string(report.paths_refused.size()) +
                      " paths alone that lie outside the state directory " + config_.state_dir +
                      " or behind a symlink, e.g. " + report.paths_refused.front(),
                  nlohmann::json{{"paths", report.paths_refused}}.dump()});
  }
  if (!report.files_removed.empty()) {
    RecordAndLog(store_,
                 {0, now, std::nullopt, "retention", store::Severity::kInfo,
                  "retention removed " + std::to_string(report.files_removed.size()) +
                      " files and folders (" + std::to_string(report.releases_removed.size()) +
                      " releases), " + std::to_string(report.bytes_removed) + " bytes; " +
                      std::to_string(report.storage_bytes) + " bytes kept",
                  nlohmann::json{{"releases", report.releases_removed},
                                 {"paths", report.files_removed},
                                 {"bytes_removed", report.bytes_removed},
                                 {"storage_bytes", report.storage_bytes},
                                 {"night_bytes", report.night_bytes}}
                      .dump()});
  }
  return report;
}

}  // namespace trainerd::daemon
