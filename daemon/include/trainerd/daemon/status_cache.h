// The stored part of the control socket's `status` answer (AnswerFromStore: active config,
// last known-good, current release, last run), kept until the run store's change stamp or
// the job file (device, inode, size, modification time) moves. File times are coarse (a
// kernel tick): like git's "racy" index entries, a job file modified less than
// kRacySeconds ago is read every time. A burst of status requests
// while a run trains then costs one set of queries and one read of the job file, not one
// per request; the answer is the same as computing it afresh.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "trainerd/store/store.h"

namespace trainerd::daemon {

class StoredStatusCache {
 public:
  static constexpr double kRacySeconds = 2;

  // `store` must outlive the cache.
  explicit StoredStatusCache(store::Store& store);

  // AnswerFromStore(store, job_path, {"command": "status"}), recomputed when stale (the
  // job path is part of the key: a reloaded daemon config may name another file).
  const nlohmann::json& Answer(const std::string& job_path);
  // How many times the answer was computed (for tests and the benchmark's explanation).
  int computations() const { return computations_; }

 private:
  struct Key {
    store::Store::ChangeStamp stamp;
    std::string job_path;
    bool job_exists = false;
    dev_t job_device = 0;
    ino_t job_inode = 0;
    off_t job_size = 0;
    std::int64_t job_mtime_ns = 0;
    bool operator==(const Key&) const = default;
  };
  // Empty when the store cannot say or the job file is racy: the answer is then computed.
  std::optional<Key> CurrentKey(const std::string& job_path);

  store::Store& store_;
  std::optional<Key> key_;
  nlohmann::json answer_;
  int computations_ = 0;
};

}  // namespace trainerd::daemon
