#include "trainerd/store/store.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <system_error>
#include <utility>

#include "rows.h"
#include "schema.h"
#include "sqlite.h"

namespace trainerd::store {
namespace {

using sqlite::Connection;
using sqlite::Execute;
using sqlite::ExecuteEach;
using sqlite::InsertReturningId;
using sqlite::InTransaction;
using sqlite::QueryAll;
using sqlite::QueryExisting;
using sqlite::QueryFirst;
using sqlite::Statement;

std::string Sql(std::string_view select, std::string_view rest) {
  return std::string(select) + " " + std::string(rest);
}

Status CheckLimit(int limit) {
  if (limit < 0) return Status::InvalidArgument("limit must be >= 0, got " + std::to_string(limit));
  return Status::Ok();
}

std::string RunName(std::int64_t run_id) { return "run " + std::to_string(run_id); }

Result<RunStatus> StoredRunStatus(Connection& db, std::int64_t run_id) {
  return QueryExisting<RunStatus>(
      db, "SELECT status FROM runs WHERE id = ?", [&](Statement& stmt) { stmt.Bind(run_id); },
      [](Statement& stmt) { return ParseRunStatus(stmt.ReadText()); }, RunName(run_id));
}

// FailedPrecondition unless the run exists and has not finished.
Status CheckUnfinished(Connection& db, std::int64_t run_id) {
  Result<RunStatus> status = StoredRunStatus(db, run_id);
  if (!status.ok()) return status.status();
  if (IsFinished(*status)) {
    return Status::FailedPrecondition("run store '" + db.path() + "': " + RunName(run_id) +
                                      " has already finished as '" +
                                      std::string(ToString(*status)) + "'");
  }
  return Status::Ok();
}

Result<std::int64_t> HardwareId(Connection& db, const HardwareFingerprint& hardware) {
  return InsertReturningId(db, rows::kUpsertHardware,
                           [&](Statement& stmt) { rows::BindHardwareRow(stmt, hardware); });
}

Result<std::int64_t> SoftwareId(Connection& db, const SoftwareFingerprint& software) {
  return InsertReturningId(db, rows::kUpsertSoftware,
                           [&](Statement& stmt) { rows::BindSoftware(stmt, software); });
}

// The ids of the hardware and software rows of `run`, recording new fingerprints.
Result<std::pair<std::int64_t, std::int64_t>> FingerprintIds(Connection& db, const RunRecord& run) {
  Result<std::int64_t> hardware = HardwareId(db, run.hardware);
  if (!hardware.ok()) return hardware.status();
  Result<std::int64_t> software = SoftwareId(db, run.software);
  if (!software.ok()) return software.status();
  return std::pair(*hardware, *software);
}

// Reads the schema version of a freshly opened file and, if asked, checks its integrity.
Result<int> Inspect(Connection& db, const StoreOptions& options) {
  Result<int> version = ReadSchemaVersion(db);
  if (!version.ok() || !options.check_integrity_on_open) return version;
  Status integrity = CheckIntegrity(db);
  if (!integrity.ok()) return integrity;
  return version;
}

Status UseWalAndFullSync(Connection& db) {
  Result<std::string> mode = db.QueryText("PRAGMA journal_mode = WAL");
  if (!mode.ok()) return mode.status();
  if (*mode != "wal") {
    return Status::IOError("run store '" + db.path() +
                           "': cannot switch to WAL journal mode (still '" + *mode + "')");
  }
  return db.Exec("PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;");
}

}  // namespace

// --- Opening ---------------------------------------------------------------------------

Result<std::unique_ptr<Store>> Store::Open(const std::string& path, const StoreOptions& options) {
  // SQLite would open a temporary database for an empty path, and fail with a vaguer
  // message than these for a missing directory.
  if (path.empty()) return Status::InvalidArgument("run store path is empty");
  const std::filesystem::path directory = std::filesystem::path(path).parent_path();
  std::error_code error;
  if (!directory.empty() && !std::filesystem::is_directory(directory, error)) {
    return Status::NotFound("run store '" + path + "': directory '" + directory.string() +
                            "' does not exist or is not a directory");
  }
  Result<std::unique_ptr<Connection>> db =
      Connection::Open(path, Connection::Mode::kReadWriteCreate, options.busy_timeout_ms);
  if (!db.ok()) return db.status();
  if ((*db)->read_only()) {
    return Status::IOError("run store '" + path +
                           "' cannot be opened for writing (read-only file or file system); "
                           "the file was not changed");
  }
  // Nothing is written before the file is known to be a trainerd store (or empty).
  Result<int> version = Inspect(**db, options);
  if (!version.ok()) return version.status();
  Status status = UseWalAndFullSync(**db);
  if (!status.ok()) return status;
  status = Migrate(**db);
  if (!status.ok()) return status;
  return std::unique_ptr<Store>(new Store(std::move(*db)));
}

Result<std::unique_ptr<Store>> Store::OpenReadOnly(const std::string& path,
                                                   const StoreOptions& options) {
  std::error_code error;
  if (!std::filesystem::exists(path, error)) {
    return Status::NotFound("run store '" + path + "' does not exist");
  }
  Result<std::unique_ptr<Connection>> db =
      Connection::Open(path, Connection::Mode::kReadOnly, options.busy_timeout_ms);
  if (!db.ok()) return db.status();
  Result<int> version = Inspect(**db, options);
  if (!version.ok()) return version.status();
  if (*version < kSchemaVersion) {
    return Status::FailedPrecondition("run store '" + path + "' has schema version " +
                                      std::to_string(*version) + " and this build reads version " +
                                      std::to_string(kSchemaVersion) +
                                      "; open it read-write once (start trainerd) to migrate it");
  }
  return std::unique_ptr<Store>(new Store(std::move(*db)));
}

Store::Store(std::unique_ptr<Connection> db) : db_(std::move(db)) {}

Store::~Store() = default;

const std::string& Store::path() const { return db_->path(); }

Result<Store::ChangeStamp> Store::CurrentChangeStamp() {
  Result<std::int64_t> data_version = db_->QueryInt64("PRAGMA data_version");
  if (!data_version.ok()) return data_version.status();
  return ChangeStamp{db_->total_changes(), *data_version};
}

// --- Config versions -------------------------------------------------------------------

Result<ConfigVersion> Store::RecordConfigVersion(const ConfigVersion& version) {
  ConfigVersion stored;
  Status status = InTransaction(*db_, [&]() -> Status {
    Result<std::optional<ConfigVersion>> existing = QueryFirst<ConfigVersion>(
        *db_, Sql(rows::kSelectConfigVersion, "WHERE hash = ?"),
        [&](Statement& stmt) { stmt.Bind(version.hash); }, rows::ReadConfigVersion);
    if (!existing.ok()) return existing.status();
    if (existing->has_value()) {
      stored = **existing;
      if (stored.yaml == version.yaml) return Status::Ok();
      return Status::InvalidArgument("run store '" + db_->path() + "': config hash '" +
                                     version.hash + "' is already recorded with other YAML");
    }
    stored = version;
    stored.state = ConfigState::kCandidate;
    Status inserted = Execute(
        *db_, "INSERT INTO config_versions (hash, yaml, first_seen, state) VALUES (?, ?, ?, ?)",
        [&](Statement& stmt) {
          stmt.Bind(stored.hash, stored.yaml, stored.first_seen, ToString(stored.state));
        });
    if (!inserted.ok()) return inserted;
    const ConfigStateChange first{stored.hash, stored.state, "first seen", stored.first_seen,
                                  std::nullopt};
    return Execute(*db_, rows::kInsertConfigStateChange,
                   [&](Statement& stmt) { rows::BindConfigStateChange(stmt, first); });
  });
  if (!status.ok()) return status;
  return stored;
}

Result<ConfigVersion> Store::GetConfigVersion(std::string_view hash) {
  return QueryExisting<ConfigVersion>(
      *db_, Sql(rows::kSelectConfigVersion, "WHERE hash = ?"),
      [&](Statement& stmt) { stmt.Bind(hash); }, rows::ReadConfigVersion,
      "config version '" + std::string(hash) + "'");
}

Result<std::vector<ConfigVersion>> Store::ListConfigVersions() {
  return QueryAll<ConfigVersion>(
      *db_, Sql(rows::kSelectConfigVersion, "ORDER BY first_seen DESC, hash"), [](Statement&) {},
      rows::ReadConfigVersion);
}

Status Store::SetConfigState(const ConfigStateChange& change) {
  return InTransaction(*db_, [&]() -> Status {
    Status status =
        Execute(*db_, "UPDATE config_versions SET state = ? WHERE hash = ?",
                [&](Statement& stmt) { stmt.Bind(ToString(change.state), change.config_hash); });
    if (!status.ok()) return status;
    if (db_->changes() == 0) {
      return Status::NotFound("run store '" + db_->path() + "': no config version '" +
                              change.config_hash + "'");
    }
    return Execute(*db_, rows::kInsertConfigStateChange,
                   [&](Statement& stmt) { rows::BindConfigStateChange(stmt, change); });
  });
}

Result<std::vector<ConfigStateChange>> Store::GetConfigHistory(std::string_view hash) {
  return QueryAll<ConfigStateChange>(
      *db_, Sql(rows::kSelectConfigStateChange, "WHERE config_hash = ? ORDER BY id"),
      [&](Statement& stmt) { stmt.Bind(hash); }, rows::ReadConfigStateChange);
}

Result<std::optional<ConfigVersion>> Store::LastKnownGoodConfig() {
  return QueryFirst<ConfigVersion>(
      *db_,
      Sql(rows::kSelectConfigVersion,
          "WHERE state = ?1 ORDER BY (SELECT max(h.id) FROM config_state_history h "
          "WHERE h.config_hash = config_versions.hash AND h.state = ?1) DESC LIMIT 1"),
      [](Statement& stmt) { stmt.Bind(ToString(ConfigState::kKnownGood)); },
      rows::ReadConfigVersion);
}

// --- Runs ------------------------------------------------------------------------------

Result<std::int64_t> Store::CreateRun(const RunRecord& run) {
  if (run.status != RunStatus::kScheduled) {
    return Status::InvalidArgument("a new run must be 'scheduled', not '" +
                                   std::string(ToString(run.status)) + "'");
  }
  std::int64_t run_id = 0;
  Status status = InTransaction(*db_, [&]() -> Status {
    Result<std::pair<std::int64_t, std::int64_t>> fingerprints = FingerprintIds(*db_, run);
    if (!fingerprints.ok()) return fingerprints.status();
    Result<std::int64_t> id = InsertReturningId(*db_, rows::InsertRunSql(), [&](Statement& stmt) {
      rows::BindRun(stmt, run, fingerprints->first, fingerprints->second);
    });
    if (!id.ok()) return id.status();
    run_id = *id;
    return Status::Ok();
  });
  if (!status.ok()) return status;
  return run_id;
}

Status Store::MarkRunStarted(std::int64_t run_id, double started_at) {
  return InTransaction(*db_, [&]() -> Status {
    Result<RunStatus> status = StoredRunStatus(*db_, run_id);
    if (!status.ok()) return status.status();
    if (*status != RunStatus::kScheduled) {
      return Status::FailedPrecondition("run store '" + db_->path() + "': " + RunName(run_id) +
                                        " is '" + std::string(ToString(*status)) +
                                        "', not 'scheduled'");
    }
    return Execute(
        *db_, "UPDATE runs SET status = ?, started_at = ? WHERE id = ?",
        [&](Statement& stmt) { stmt.Bind(ToString(RunStatus::kRunning), started_at, run_id); });
  });
}

Status Store::SetRunPlan(std::int64_t run_id, const PlanSpec& plan) {
  return InTransaction(*db_, [&]() -> Status {
    Status status = CheckUnfinished(*db_, run_id);
    if (!status.ok()) return status;
    return Execute(*db_, rows::kUpdatePlan, [&](Statement& stmt) {
      rows::BindPlan(stmt, plan);
      stmt.Bind(run_id);
    });
  });
}

Status Store::AppendMetrics(std::int64_t run_id, const std::vector<UpdateMetric>& metrics) {
  return InTransaction(*db_, [&]() -> Status {
    Status status = CheckUnfinished(*db_, run_id);
    if (!status.ok()) return status;
    return ExecuteEach(*db_, rows::kInsertUpdateMetric, metrics,
                       [&](Statement& stmt, const UpdateMetric& metric) {
                         rows::BindUpdateMetric(stmt, run_id, metric);
                       });
  });
}

Status Store::FinishRun(const RunRecord& run, const std::vector<UpdateMetric>& metrics,
                        const std::vector<SliceEval>& evals, const std::vector<Event>& events) {
  if (!IsFinished(run.status)) {
    return Status::InvalidArgument("cannot finish " + RunName(run.id) + " as '" +
                                   std::string(ToString(run.status)) + "': not a final status");
  }
  for (const Event& event : events) {
    if (event.run_id && *event.run_id != run.id) {
      return Status::InvalidArgument("an event of " + RunName(*event.run_id) +
                                     " cannot be recorded with " + RunName(run.id));
    }
  }
  return InTransaction(*db_, [&]() -> Status {
    Status status = CheckUnfinished(*db_, run.id);
    if (!status.ok()) return status;
    Result<std::pair<std::int64_t, std::int64_t>> fingerprints = FingerprintIds(*db_, run);
    if (!fingerprints.ok()) return fingerprints.status();
    status = Execute(*db_, rows::UpdateRunSql(), [&](Statement& stmt) {
      rows::BindRun(stmt, run, fingerprints->first, fingerprints->second);
      stmt.Bind(run.id);
    });
    if (!status.ok()) return status;
    status = ExecuteEach(*db_, rows::kInsertUpdateMetric, metrics,
                         [&](Statement& stmt, const UpdateMetric& metric) {
                           rows::BindUpdateMetric(stmt, run.id, metric);
                         });
    if (!status.ok()) return status;
    status = ExecuteEach(
        *db_, rows::kInsertSliceEval, evals,
        [&](Statement& stmt, const SliceEval& eval) { rows::BindSliceEval(stmt, run.id, eval); });
    if (!status.ok()) return status;
    return ExecuteEach(*db_, rows::kInsertEvent, events, [&](Statement& stmt, const Event& event) {
      Event of_run = event;
      of_run.run_id = run.id;
      rows::BindEvent(stmt, of_run);
    });
  });
}

Status Store::SetRunStorage(std::int64_t run_id, std::int64_t storage_bytes,
                            std::int64_t state_dir_bytes) {
  if (storage_bytes < 0 || state_dir_bytes < 0) {
    return Status::InvalidArgument("storage bytes must be >= 0, got " +
                                   std::to_string(storage_bytes) + " and " +
                                   std::to_string(state_dir_bytes));
  }
  return InTransaction(*db_, [&]() -> Status {
    Result<RunStatus> status = StoredRunStatus(*db_, run_id);
    if (!status.ok()) return status.status();
    if (!IsFinished(*status)) {
      return Status::FailedPrecondition("run store '" + db_->path() + "': " + RunName(run_id) +
                                        " has not finished");
    }
    return Execute(*db_, "UPDATE runs SET storage_bytes = ?, state_dir_bytes = ? WHERE id = ?",
                   [&](Statement& stmt) { stmt.Bind(storage_bytes, state_dir_bytes, run_id); });
  });
}

Status Store::SetRunDataQuality(std::int64_t run_id, const std::string& figures_json) {
  if (!nlohmann::json::accept(figures_json)) {
    return Status::InvalidArgument("data-quality figures of " + RunName(run_id) +
                                   " are not JSON: " + figures_json);
  }
  return InTransaction(*db_, [&]() -> Status {
    if (Status status = CheckUnfinished(*db_, run_id); !status.ok()) return status;
    return Execute(*db_, "UPDATE runs SET data_quality = ? WHERE id = ?",
                   [&](Statement& stmt) { stmt.Bind(figures_json, run_id); });
  });
}

Result<std::vector<std::int64_t>> Store::MarkUnfinishedAsInterrupted(double at) {
  std::vector<std::int64_t> ids;
  Status status = InTransaction(*db_, [&]() -> Status {
    Result<std::vector<std::int64_t>> updated = QueryAll<std::int64_t>(
        *db_, "UPDATE runs SET status = ?, ended_at = ? WHERE status IN (?, ?) RETURNING id",
        [&](Statement& stmt) {
          stmt.Bind(ToString(RunStatus::kInterrupted), at, ToString(RunStatus::kRunning),
                    ToString(RunStatus::kScheduled));
        },
        [](Statement& stmt) { return stmt.ReadInt64(); });
    if (!updated.ok()) return updated.status();
    ids = *std::move(updated);
    return Status::Ok();
  });
  if (!status.ok()) return status;
  std::sort(ids.begin(), ids.end());
  return ids;
}

Result<RunRecord> Store::GetRun(std::int64_t run_id) {
  return QueryExisting<RunRecord>(
      *db_, Sql(rows::kSelectRun, "WHERE r.id = ?"), [&](Statement& stmt) { stmt.Bind(run_id); },
      rows::ReadRun, RunName(run_id));
}

Result<std::vector<RunRecord>> Store::ListRecentRuns(int limit) {
  Status status = CheckLimit(limit);
  if (!status.ok()) return status;
  return QueryAll<RunRecord>(
      *db_, Sql(rows::kSelectRun, "ORDER BY r.id DESC LIMIT ?"),
      [&](Statement& stmt) { stmt.Bind(limit); }, rows::ReadRun);
}

Result<std::vector<RunRecord>> Store::ListRunsByStatus(RunStatus status, int limit) {
  Status valid = CheckLimit(limit);
  if (!valid.ok()) return valid;
  return QueryAll<RunRecord>(
      *db_, Sql(rows::kSelectRun, "WHERE r.status = ? ORDER BY r.id DESC LIMIT ?"),
      [&](Statement& stmt) { stmt.Bind(ToString(status), limit); }, rows::ReadRun);
}

Result<std::vector<UpdateMetric>> Store::GetMetrics(std::int64_t run_id) {
  return QueryAll<UpdateMetric>(
      *db_, Sql(rows::kSelectUpdateMetric, "WHERE run_id = ? ORDER BY update_index"),
      [&](Statement& stmt) { stmt.Bind(run_id); }, rows::ReadUpdateMetric);
}

Result<std::vector<SliceEval>> Store::GetSliceEvals(std::int64_t run_id) {
  return QueryAll<SliceEval>(
      *db_, Sql(rows::kSelectSliceEval, "WHERE run_id = ? ORDER BY update_index, slice"),
      [&](Statement& stmt) { stmt.Bind(run_id); }, rows::ReadSliceEval);
}

Result<std::optional<PlanSpec>> Store::LastValidatedPlan(std::string_view config_hash,
                                                         const HardwareFingerprint& hardware,
                                                         const SoftwareFingerprint& software) {
  return QueryFirst<PlanSpec>(
      *db_,
      Sql(rows::kSelectPlan,
          "JOIN software s ON s.id = r.software_id WHERE r.config_hash = ? AND r.status = ? AND "
          "s.trainerd_version = ? AND s.libtorch_version = ? AND r.hardware_id = " +
              std::string(rows::kHardwareId) + " ORDER BY r.id DESC LIMIT 1"),
      [&](Statement& stmt) {
        stmt.Bind(config_hash, ToString(RunStatus::kSucceeded), software.trainerd_version,
                  software.libtorch_version);
        rows::BindHardware(stmt, hardware);
      },
      rows::ReadPlan);
}

Result<std::optional<RunRecord>> Store::LastSucceededRun(const HardwareFingerprint& hardware) {
  return QueryFirst<RunRecord>(
      *db_,
      Sql(rows::kSelectRun, "WHERE r.status = ? AND r.hardware_id = " +
                                std::string(rows::kHardwareId) + " ORDER BY r.id DESC LIMIT 1"),
      [&](Statement& stmt) {
        stmt.Bind(ToString(RunStatus::kSucceeded));
        rows::BindHardware(stmt, hardware);
      },
      rows::ReadRun);
}

// --- Events ----------------------------------------------------------------------------

Result<std::int64_t> Store::RecordEvent(const Event& event) {
  std::int64_t event_id = 0;
  Status status = InTransaction(*db_, [&]() -> Status {
    Result<std::int64_t> id = InsertReturningId(
        *db_, rows::kInsertEvent, [&](Statement& stmt) { rows::BindEvent(stmt, event); });
    if (!id.ok()) return id.status();
    event_id = *id;
    return Status::Ok();
  });
  if (!status.ok()) return status;
  return event_id;
}

Result<std::vector<Event>> Store::ListRecentEvents(int limit) {
  Status status = CheckLimit(limit);
  if (!status.ok()) return status;
  return QueryAll<Event>(
      *db_, Sql(rows::kSelectEvent, "ORDER BY id DESC LIMIT ?"),
      [&](Statement& stmt) { stmt.Bind(limit); }, rows::ReadEvent);
}

Result<std::vector<Event>> Store::GetRunEvents(std::int64_t run_id) {
  return QueryAll<Event>(
      *db_, Sql(rows::kSelectEvent, "WHERE run_id = ? ORDER BY id"),
      [&](Statement& stmt) { stmt.Bind(run_id); }, rows::ReadEvent);
}

// --- Releases --------------------------------------------------------------------------

Result<std::int64_t> Store::RecordRelease(const Release& release) {
  std::int64_t release_id = 0;
  Status status = InTransaction(*db_, [&]() -> Status {
    Result<std::int64_t> id = InsertReturningId(
        *db_, rows::kInsertRelease, [&](Statement& stmt) { rows::BindRelease(stmt, release); });
    if (!id.ok()) return id.status();
    release_id = *id;
    return Status::Ok();
  });
  if (!status.ok()) return status;
  return release_id;
}

namespace {

std::string ReleaseName(std::int64_t release_id) { return "release " + std::to_string(release_id); }

// Makes `release_id` current at `at` inside the caller's transaction.
Status MakeCurrent(Connection& db, std::int64_t release_id, double at) {
  Result<Release> release = QueryExisting<Release>(
      db, Sql(rows::kSelectRelease, "WHERE id = ?"),
      [&](Statement& stmt) { stmt.Bind(release_id); }, rows::ReadRelease, ReleaseName(release_id));
  if (!release.ok()) return release.status();
  const std::string name = "run store '" + db.path() + "': " + ReleaseName(release_id);
  if (!release->gate_passed) {
    return Status::FailedPrecondition(name + " did not pass the release gate");
  }
  if (release->files_removed_at) {
    return Status::FailedPrecondition(name + "'s files were removed by the retention policy");
  }
  Result<std::optional<std::int64_t>> withdrawn = QueryFirst<std::int64_t>(
      db, "SELECT id FROM releases WHERE artifact_hash = ? AND withdrawn IS NOT NULL",
      [&](Statement& stmt) { stmt.Bind(release->artifact_hash); },
      [](Statement& stmt) { return stmt.ReadInt64(); });
  if (!withdrawn.ok()) return withdrawn.status();
  if (*withdrawn) {
    return Status::FailedPrecondition(
        name + " holds model " + release->artifact_hash.substr(0, 12) + ", which " +
        (**withdrawn == release_id ? std::string("was") : ReleaseName(**withdrawn) + " was") +
        " withdrawn after its outcomes regressed");
  }
  Result<std::optional<Release>> before = QueryFirst<Release>(
      db, Sql(rows::kSelectRelease, "WHERE is_current = 1"), [](Statement&) {}, rows::ReadRelease);
  if (!before.ok()) return before.status();
  Status status =
      Execute(db, "UPDATE releases SET is_current = 0 WHERE is_current = 1", [](Statement&) {});
  if (!status.ok()) return status;
  const std::optional<std::int64_t> previous =
      *before ? std::optional<std::int64_t>((*before)->id) : std::nullopt;
  return Execute(db,
                 "UPDATE releases SET is_current = 1, live_at = COALESCE(live_at, ?), "
                 "previous_release_id = CASE WHEN live_at IS NULL THEN ? "
                 "ELSE previous_release_id END WHERE id = ?",
                 [&](Statement& stmt) { stmt.Bind(at, previous, release_id); });
}

}  // namespace

Status Store::SetCurrentRelease(std::int64_t release_id, double at) {
  return InTransaction(*db_, [&]() { return MakeCurrent(*db_, release_id, at); });
}

Status Store::WithdrawRelease(std::int64_t release_id, std::int64_t to,
                              const std::string& reason_json, double at) {
  return InTransaction(*db_, [&]() -> Status {
    Result<Release> release = GetRelease(release_id);
    if (!release.ok()) return release.status();
    const std::string name = "run store '" + db_->path() + "': " + ReleaseName(release_id);
    if (!release->current) return Status::FailedPrecondition(name + " is not the current one");
    if (release->pinned) return Status::FailedPrecondition(name + " is pinned");
    Status status = Execute(*db_, "UPDATE releases SET withdrawn = ? WHERE id = ?",
                            [&](Statement& stmt) { stmt.Bind(reason_json, release_id); });
    if (!status.ok()) return status;
    return MakeCurrent(*db_, to, at);
  });
}

Status Store::MarkReleaseFilesRemoved(const std::vector<std::int64_t>& release_ids, double at) {
  return InTransaction(*db_, [&]() -> Status {
    for (const std::int64_t id : release_ids) {
      Result<Release> release = GetRelease(id);
      if (!release.ok()) return release.status();
      if (release->current) {
        return Status::FailedPrecondition("run store '" + db_->path() + "': " + ReleaseName(id) +
                                          " is current: its files stay");
      }
      Status status = Execute(
          *db_, "UPDATE releases SET files_removed_at = COALESCE(files_removed_at, ?) WHERE id = ?",
          [&](Statement& stmt) { stmt.Bind(at, id); });
      if (!status.ok()) return status;
    }
    return Status::Ok();
  });
}

Status Store::SetReleasePinned(std::int64_t release_id, bool pinned) {
  return InTransaction(*db_, [&]() -> Status {
    Result<Release> release = GetRelease(release_id);
    if (!release.ok()) return release.status();
    return Execute(*db_, "UPDATE releases SET pinned = ? WHERE id = ?",
                   [&](Statement& stmt) { stmt.Bind(pinned, release_id); });
  });
}

Result<std::optional<Release>> Store::CurrentRelease() {
  return QueryFirst<Release>(
      *db_, Sql(rows::kSelectRelease, "WHERE is_current = 1"), [](Statement&) {},
      rows::ReadRelease);
}

Result<Release> Store::GetRelease(std::int64_t release_id) {
  return QueryExisting<Release>(
      *db_, Sql(rows::kSelectRelease, "WHERE id = ?"),
      [&](Statement& stmt) { stmt.Bind(release_id); }, rows::ReadRelease,
      "release " + std::to_string(release_id));
}

Result<std::vector<Release>> Store::ListReleases(int limit) {
  Status status = CheckLimit(limit);
  if (!status.ok()) return status;
  return QueryAll<Release>(
      *db_, Sql(rows::kSelectRelease, "ORDER BY id DESC LIMIT ?"),
      [&](Statement& stmt) { stmt.Bind(limit); }, rows::ReadRelease);
}

Result<std::vector<Release>> Store::FindReleasesByArtifact(std::string_view hash_prefix) {
  return QueryAll<Release>(
      *db_, Sql(rows::kSelectRelease, "WHERE substr(artifact_hash, 1, ?) = ? ORDER BY id DESC"),
      [&](Statement& stmt) {
        stmt.Bind(static_cast<std::int64_t>(hash_prefix.size()), hash_prefix);
      },
      rows::ReadRelease);
}

// --- Outcomes --------------------------------------------------------------------------

Result<std::int64_t> Store::RecordOutcomes(
    const std::vector<Outcome>& outcomes,
    const std::function<std::string(std::size_t index)>& name_of) {
  std::int64_t added = 0;
  std::set<std::int64_t> releases;  // known to exist
  Status status = InTransaction(*db_, [&]() -> Status {
    for (std::size_t i = 0; i < outcomes.size(); ++i) {
      const Outcome& o = outcomes[i];
      // Formed only for an error: an import of many lines names none of the good ones.
      const auto where = [&] {
        return (name_of ? name_of(i) : "outcome " + std::to_string(i + 1)) + " (" +
               ReleaseName(o.release_id) + ", slice '" + o.slice + "', metric '" + o.metric + "')";
      };
      if (!(std::abs(o.value) <= kMaxOutcomeValue) || !std::isfinite(o.at) || o.count < 1 ||
          o.count > kMaxOutcomeCount) {
        return Status::InvalidArgument(
            where() + ": needs a value within +-10^15, a finite time and a count in [1, 10^12]");
      }
      if (releases.count(o.release_id) == 0) {
        Result<Release> release = GetRelease(o.release_id);
        if (!release.ok()) {
          return Status::InvalidArgument(where() + ": " + release.status().message());
        }
        releases.insert(o.release_id);
      }
      Result<std::optional<Outcome>> stored = QueryFirst<Outcome>(
          *db_,
          Sql(rows::kSelectOutcome, "WHERE release_id = ? AND slice = ? AND metric = ? AND at = ?"),
          [&](Statement& stmt) { stmt.Bind(o.release_id, o.slice, o.metric, o.at); },
          rows::ReadOutcome);
      if (!stored.ok()) return stored.status();
      if (*stored) {
        if (**stored == o) continue;
        return Status::InvalidArgument(
            where() + " at " + std::to_string(o.at) + ": stored already with value " +
            std::to_string((*stored)->value) + " and count " + std::to_string((*stored)->count));
      }
      Status inserted =
          Execute(*db_, rows::kInsertOutcome, [&](Statement& stmt) { rows::BindOutcome(stmt, o); });
      if (!inserted.ok()) return inserted;
      ++added;
    }
    return Status::Ok();
  });
  if (!status.ok()) return status;
  return added;
}

Result<std::vector<OutcomeTotal>> Store::GetOutcomeTotals(std::int64_t release_id, double until) {
  return QueryAll<OutcomeTotal>(
      *db_,
      Sql(rows::kSelectOutcomeTotal,
          "WHERE release_id = ? AND at <= ? GROUP BY slice, metric ORDER BY slice, metric"),
      [&](Statement& stmt) { stmt.Bind(release_id, until); }, rows::ReadOutcomeTotal);
}

}  // namespace trainerd::store
