// One trainerd per state directory: an exclusive flock(2) on <state_dir>/trainerd.lock, taken
// before the daemon touches anything there. A second daemon on the same directory would
// otherwise stop the live worker (worker.pid), mark its run interrupted and run the outcome
// watch and retention before it found the control socket taken. The kernel drops the lock
// when its holder dies, however it dies: a stale lock file never blocks a restart.
// Thread safety: none needed (one per process); movable, not copyable.
#pragma once

#include <string>

#include "trainerd/common/status.h"

namespace trainerd::daemon {

class InstanceLock {
 public:
  // Locks `path` (created 0640 when missing) and writes this process's pid into it.
  // FailedPrecondition naming the path and the holder's pid when another process holds it;
  // IOError when it cannot be opened or locked.
  static Result<InstanceLock> Acquire(const std::string& path);

  InstanceLock(InstanceLock&& other) noexcept;
  InstanceLock& operator=(InstanceLock&& other) noexcept;
  InstanceLock(const InstanceLock&) = delete;
  InstanceLock& operator=(const InstanceLock&) = delete;
  // Releases the lock (the file stays).
  ~InstanceLock();

 private:
  explicit InstanceLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace trainerd::daemon
