// The daemon's state directory (docs/daemon.md):
//   trainerd.db            the run store
//   configs/<hash>.yaml    each config version's exact text, as the worker reads it
//   work/                  the training worker's output: checkpoint.pt, model.pt, plan.json
//   releases/run-<id>-<sha12>/  each published model: model.pt, model.safetensors, model.json;
//                          rejected/ holds those the gate refused
//   releases/current       a link to the current release's folder (switched atomically)
//   logs/run-<id>.log      each run's worker stderr
//   logs/device-info.log   stderr of the worker that describes a GPU at the cycle's start
//   reports/run-<id>.html  each run's report page, written at the end of its cycle
//   profiles/run-<id>.trace.json  the Chrome trace of a new plan's op profile
//   data/<fingerprint>.json  each night's data profile (trainer-run --data-profile), the next
//                          nights' reference while its release is current
//   worker.pid             the running worker's pid
//   trainerd.lock          held (flock) by the daemon that runs on this directory
#pragma once

#include <cstdint>
#include <string>

#include "trainerd/common/status.h"

namespace trainerd::daemon {

class StateLayout {
 public:
  explicit StateLayout(std::string state_dir) : dir_(std::move(state_dir)) {}

  std::string ConfigCopy(const std::string& config_hash) const;
  std::string WorkDir() const;
  std::string PlanFile() const;
  std::string RunLog(std::int64_t run_id) const;
  std::string DeviceInfoLog() const;
  std::string RunReport(std::int64_t run_id) const;
  std::string ProfileTrace(std::int64_t run_id) const;
  std::string DataProfile(const std::string& data_fingerprint) const;
  // The folder of run `run_id`'s model (`sha256` its model.pt's hash), under rejected/ when
  // the gate refused it.
  std::string ReleaseDir(std::int64_t run_id, const std::string& sha256, bool released) const;
  std::string CurrentReleaseLink() const;
  std::string WorkerPidFile() const;
  std::string LockFile() const;
  // Whether `path` lies below this state directory (after making both absolute and
  // normalising them) with no symlink among the folders between them: what the daemon may
  // remove. A path read from the database (a restored copy's releases, an edited row) or a
  // folder replaced by a link to elsewhere is not.
  bool Holds(const std::string& path) const;
  // Creates the directory and its subdirectories (mode 0750); the error names the path.
  Status CreateDirectories() const;

 private:
  std::string dir_;
};

}  // namespace trainerd::daemon
