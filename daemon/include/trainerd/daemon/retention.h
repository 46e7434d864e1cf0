// The retention policy (retention: in the daemon config, docs/daemon.md "Retention"): every
// night adds a release folder, a report, a worker log and perhaps a profile trace; without a
// bound the disk fills. After each night and at start-up the daemon removes the files of
// releases beyond the newest `retention.releases` (never the current release, the one it
// replaced, the one a model rollback would pick, or a pinned one) and the reports, traces and
// logs of runs older than `retention.files` (and their data profiles, unless a run kept has
// the same data), recording first what it removes: a daemon killed
// mid-removal leaves no record naming files that are gone, and the next pass finishes the job.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trainerd/daemon/clock.h"
#include "trainerd/daemon/daemon_config.h"
#include "trainerd/daemon/daemon_metrics.h"
#include "trainerd/daemon/file_store.h"
#include "trainerd/store/store.h"

namespace trainerd::daemon {

// The releases whose files go, of `releases` (any order): all but the newest `keep_newest`
// by id and those the policy always keeps, less those already removed. Ascending ids.
std::vector<std::int64_t> ReleasesToRemove(const std::vector<store::Release>& releases,
                                           int keep_newest);

struct RetentionReport {
  std::vector<std::int64_t> releases_removed;
  std::vector<std::string> files_removed;  // paths, release folders included
  // Paths the records named that lie outside the state directory or behind a symlink in it
  // (StateLayout::Holds): left alone.
  std::vector<std::string> paths_refused;
  std::int64_t bytes_removed = 0;
  std::int64_t storage_bytes = 0;  // the state directory's bytes afterwards
  std::int64_t night_bytes =
      0;  // the newest run's files: release, report, log, trace, data profile
};

class Retention {
 public:
  // `config` is read at each Apply (the daemon's, reloaded on SIGHUP); `metrics` may be null.
  Retention(const DaemonConfig& config, store::Store& store, FileStore& files, const Clock& clock,
            DaemonMetrics* metrics);

  // Applies the policy now: a `retention` event names what was removed (none when nothing
  // was), the newest run's record takes its storage bytes and the state directory's (when
  // it has none yet), and the metrics show them.
  Result<RetentionReport> Apply();

 private:
  // Removes the file or folder at `path` if it exists, counting it in `report`.
  void RemoveCounted(const std::string& path, RetentionReport* report);

  const DaemonConfig& config_;
  store::Store& store_;
  FileStore& files_;
  const Clock& clock_;
  DaemonMetrics* metrics_;
};

}  // namespace trainerd::daemon
