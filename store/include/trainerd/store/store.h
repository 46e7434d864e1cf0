// The run store: a durable, versioned record of every config version, run, metric, event,
// release and outcome, kept in one SQLite database file (see docs/store.md).
//
// Durability: the database runs in WAL mode with synchronous=FULL; a call that returned Ok
// has been committed and synced, and writes that belong together commit in one
// transaction, so a crash never leaves half of them.
//
// Ownership and thread safety: a Store owns one SQLite connection. It is not thread-safe;
// use one Store per thread. The daemon holds the only read-write Store; other processes
// may hold read-only Stores on the same file at the same time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "trainerd/common/status.h"
#include "trainerd/store/records.h"

namespace trainerd::store {

namespace sqlite {
class Connection;
}  // namespace sqlite

// The schema version this build writes and reads (PRAGMA user_version). Open migrates
// older databases to it and refuses newer ones.
inline constexpr int kSchemaVersion = 17;

struct StoreOptions {
  // How long a statement waits for a lock held by another connection, milliseconds.
  int busy_timeout_ms = 5000;
  // Run PRAGMA quick_check when opening; its cost grows with the database size.
  bool check_integrity_on_open = true;
};

class Store {
 public:
  // Opens the store at `path` for reading and writing, creating the file when it does not
  // exist and migrating an older schema. Errors name the path, and leave an existing file
  // unchanged:
  //   NotFound            the directory of `path` does not exist
  //   IOError             the file cannot be opened for writing (e.g. read-only)
  //   Corruption          not an SQLite file, or damaged
  //   InvalidArgument     an SQLite database that is not a trainerd run store
  //   FailedPrecondition  written by a newer trainerd (schema newer than kSchemaVersion)
  [[nodiscard]] static Result<std::unique_ptr<Store>> Open(const std::string& path,
                                                           const StoreOptions& options = {});
  // Opens an existing store for reading only; never creates, migrates or writes the file.
  // Errors as for Open, plus NotFound when the file does not exist and FailedPrecondition
  // when its schema is older than kSchemaVersion (Open it read-write once to migrate).
  // Every write method of a read-only Store returns FailedPrecondition.
  [[nodiscard]] static Result<std::unique_ptr<Store>> OpenReadOnly(
      const std::string& path, const StoreOptions& options = {});

  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  const std::string& path() const;

  // Changes whenever the stored data may have: a commit of this Store (rows it changed) or
  // of any other connection to the file (PRAGMA data_version). Equal stamps mean equal
  // data, so a reader can keep what it computed from the store until the stamp moves.
  struct ChangeStamp {
    std::int64_t own_changes = 0;
    std::int64_t data_version = 0;
    bool operator==(const ChangeStamp&) const = default;
  };
  [[nodiscard]] Result<ChangeStamp> CurrentChangeStamp();

  // --- Config versions -------------------------------------------------------------------

  // Records `version` if its hash is new, with state kCandidate whatever `version.state`
  // says, and a first history entry. Returns the stored version: for a known hash, the
  // stored one. InvalidArgument when a known hash arrives with different YAML text.
  [[nodiscard]] Result<ConfigVersion> RecordConfigVersion(const ConfigVersion& version);
  // NotFound for an unknown hash.
  [[nodiscard]] Result<ConfigVersion> GetConfigVersion(std::string_view hash);
  // Every version, most recently first seen first.
  [[nodiscard]] Result<std::vector<ConfigVersion>> ListConfigVersions();
  // Moves a config version to `change.state` and appends `change` to its history, in one
  // transaction. NotFound for an unknown hash.
  [[nodiscard]] Status SetConfigState(const ConfigStateChange& change);
  // State changes of one version, oldest first; empty for an unknown hash.
  [[nodiscard]] Result<std::vector<ConfigStateChange>> GetConfigHistory(std::string_view hash);
  // The version most recently marked known-good that is still known-good; empty if none.
  [[nodiscard]] Result<std::optional<ConfigVersion>> LastKnownGoodConfig();

  // --- Runs ------------------------------------------------------------------------------

  // Records a new run and returns its id (`run.id` is ignored).
  // REQUIRES: run.status == kScheduled; run.config_hash recorded; run.fallback_of, if set,
  // an existing run. InvalidArgument otherwise.
  [[nodiscard]] Result<std::int64_t> CreateRun(const RunRecord& run);
  // Moves a scheduled run to kRunning. NotFound for an unknown id, FailedPrecondition when
  // the run is not scheduled.
  [[nodiscard]] Status MarkRunStarted(std::int64_t run_id, double started_at);
  // Records the plan a scheduled or running run has chosen, the moment it is chosen, so
  // that a run interrupted later still names it. NotFound for an unknown id,
  // FailedPrecondition for a finished run.
  [[nodiscard]] Status SetRunPlan(std::int64_t run_id, const PlanSpec& plan);
  // Appends per-update metrics of a scheduled or running run in one transaction: all of
  // them or none. InvalidArgument when an update index is already stored.
  [[nodiscard]] Status AppendMetrics(std::int64_t run_id, const std::vector<UpdateMetric>& metrics);
  // Records the end of a run in one transaction: every field of `run` (found by `run.id`),
  // the remaining metrics, the slice evals and the events. Events without a run id get
  // `run.id`. REQUIRES: IsFinished(run.status) and every event's run id empty or run.id
  // (InvalidArgument otherwise); the stored run is scheduled or running
  // (FailedPrecondition otherwise; NotFound for an unknown id).
  [[nodiscard]] Status FinishRun(const RunRecord& run, const std::vector<UpdateMetric>& metrics,
                                 const std::vector<SliceEval>& evals,
                                 const std::vector<Event>& events);
  // Records a finished run's storage bytes and the state directory's, measured after the
  // night's retention pass. NotFound for an unknown id; FailedPrecondition for a run that has
  // not finished; InvalidArgument for negative bytes.
  [[nodiscard]] Status SetRunStorage(std::int64_t run_id, std::int64_t storage_bytes,
                                     std::int64_t state_dir_bytes);
  // The input-quality check's figures (JSON) for an unfinished run; InvalidArgument for text
  // that is not JSON, FailedPrecondition once the run finished.
  [[nodiscard]] Status SetRunDataQuality(std::int64_t run_id, const std::string& figures_json);
  // For a daemon restart: every run still kRunning, or kScheduled (its daemon died between
  // creating it and starting it), becomes kInterrupted with ended_at = `at`, in one
  // transaction. Returns their ids, ascending.
  [[nodiscard]] Result<std::vector<std::int64_t>> MarkUnfinishedAsInterrupted(double at);

  // NotFound for an unknown id.
  [[nodiscard]] Result<RunRecord> GetRun(std::int64_t run_id);
  // The last `limit` runs, newest first. REQUIRES: limit >= 0.
  [[nodiscard]] Result<std::vector<RunRecord>> ListRecentRuns(int limit);
  // The last `limit` runs with `status`, newest first. REQUIRES: limit >= 0.
  [[nodiscard]] Result<std::vector<RunRecord>> ListRunsByStatus(RunStatus status, int limit);
  // Metrics of a run by update index; evals by update index, then slice name.
  [[nodiscard]] Result<std::vector<UpdateMetric>> GetMetrics(std::int64_t run_id);
  [[nodiscard]] Result<std::vector<SliceEval>> GetSliceEvals(std::int64_t run_id);
  // The plan of the newest succeeded run of `config_hash` on `hardware` trained by
  // `software`'s trainerd and LibTorch versions (their BLAS and compiler aside); empty if
  // none. A plan validated by another release is checked again: an upgrade may change
  // what a plan computes.
  [[nodiscard]] Result<std::optional<PlanSpec>> LastValidatedPlan(
      std::string_view config_hash, const HardwareFingerprint& hardware,
      const SoftwareFingerprint& software);
  // The newest succeeded run on `hardware` (the throughput baseline); empty if none.
  [[nodiscard]] Result<std::optional<RunRecord>> LastSucceededRun(
      const HardwareFingerprint& hardware);

  // --- Events ----------------------------------------------------------------------------

  // Records one event (`event.id` is ignored) and returns its id.
  [[nodiscard]] Result<std::int64_t> RecordEvent(const Event& event);
  // The last `limit` events of any run or none, newest first. REQUIRES: limit >= 0.
  [[nodiscard]] Result<std::vector<Event>> ListRecentEvents(int limit);
  // Every event of one run, oldest first.
  [[nodiscard]] Result<std::vector<Event>> GetRunEvents(std::int64_t run_id);

  // --- Releases --------------------------------------------------------------------------

  // Records a release, not current whatever `release.current` says, and returns its id.
  [[nodiscard]] Result<std::int64_t> RecordRelease(const Release& release);
  // Makes one release current and the previous current one not, atomically, at `at`: the
  // first time, its live_at and previous_release_id are set. NotFound for an unknown id;
  // FailedPrecondition when its gate did not pass, its files were removed, or it or a release
  // of the same artifact hash was withdrawn.
  [[nodiscard]] Status SetCurrentRelease(std::int64_t release_id, double at);
  // Withdraws the current release `release_id` (withdrawn_json = `reason_json`) and makes
  // `to` current at `at`, in one transaction. FailedPrecondition when `release_id` is not the
  // current release or is pinned, or when `to` cannot be made current; NotFound for an
  // unknown id.
  [[nodiscard]] Status WithdrawRelease(std::int64_t release_id, std::int64_t to,
                                       const std::string& reason_json, double at);
  // Pins or unpins a release. NotFound for an unknown id.
  [[nodiscard]] Status SetReleasePinned(std::int64_t release_id, bool pinned);
  // Records that the retention policy removes the files of `release_ids` at `at`, in one
  // transaction, before they are removed: a record never names files that are gone.
  // FailedPrecondition (and nothing recorded) when one of them is current; NotFound for an
  // unknown id.
  [[nodiscard]] Status MarkReleaseFilesRemoved(const std::vector<std::int64_t>& release_ids,
                                               double at);
  // Empty when no release was ever made current.
  [[nodiscard]] Result<std::optional<Release>> CurrentRelease();
  // NotFound for an unknown id.
  [[nodiscard]] Result<Release> GetRelease(std::int64_t release_id);
  // The last `limit` releases, newest first. REQUIRES: limit >= 0.
  [[nodiscard]] Result<std::vector<Release>> ListReleases(int limit);
  // The releases whose artifact hash starts with `hash_prefix`, newest first.
  [[nodiscard]] Result<std::vector<Release>> FindReleasesByArtifact(std::string_view hash_prefix);

  // --- Outcomes --------------------------------------------------------------------------

  // Records outcomes in one transaction: all of them or none. An outcome equal to a stored
  // one is skipped; returns how many were new. InvalidArgument, naming the outcome (as
  // name_of(i) says where given, else "outcome i+1"), when another value or count is stored
  // under its key, or when it breaks the record's rules (count in [1, 10^12], a value within
  // +-10^15 so that the sums of a release's outcomes stay finite, a finite time, an existing
  // release).
  [[nodiscard]] Result<std::int64_t> RecordOutcomes(
      const std::vector<Outcome>& outcomes,
      const std::function<std::string(std::size_t index)>& name_of = {});
  // A release's outcomes by slice and metric (ordered by both), those observed up to `until`.
  [[nodiscard]] Result<std::vector<OutcomeTotal>> GetOutcomeTotals(std::int64_t release_id,
                                                                   double until);

 private:
  explicit Store(std::unique_ptr<sqlite::Connection> db);

  std::unique_ptr<sqlite::Connection> db_;
};

}  // namespace trainerd::store
