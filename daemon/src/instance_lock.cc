#include "trainerd/daemon/instance_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace trainerd::daemon {

Result<InstanceLock> InstanceLock::Acquire(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0640);
  if (fd < 0) return Status::IOError(path + ": cannot open the lock file: " + std::strerror(errno));
  InstanceLock lock(fd);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK) {
      return Status::IOError(path + ": cannot lock: " + std::strerror(errno));
    }
    char holder[32] = {};
    const ssize_t n = ::pread(fd, holder, sizeof holder - 1, 0);
    return Status::FailedPrecondition(
        path + ": another trainerd (pid " + std::string(holder, n > 0 ? n : 0) +
        ") runs on this state directory; stop it first, or give this one another --state-dir");
  }
  const std::string pid = std::to_string(::getpid());
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    return Status::IOError(path + ": cannot write the pid: " + std::strerror(errno));
  }
  return lock;
}

InstanceLock::InstanceLock(InstanceLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

InstanceLock& InstanceLock::operator=(InstanceLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

InstanceLock::~InstanceLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace trainerd::daemon
