#include "trainerd/common/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <utility>

namespace trainerd {
namespace {

Status FsyncPath(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) return Status::IOError(path + ": open for fsync: " + std::strerror(errno));
  const int rc = ::fsync(fd);
  const int saved = errno;
  ::close(fd);
  if (rc != 0) return Status::IOError(path + ": fsync: " + std::strerror(saved));
  return Status::Ok();
}

}  // namespace

TemporaryFile::TemporaryFile(std::string target) : target_(std::move(target)) {
  static std::atomic<unsigned long> counter{0};
  folder_ = target_ + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  path_ = folder_ + "/" + std::filesystem::path(target_).filename().string();
  // A folder that cannot be made fails the write into it, which names the path.
  ::mkdir(folder_.c_str(), 0700);
}

TemporaryFile::~TemporaryFile() {
  if (!committed_) ::unlink(path_.c_str());  // nothing to do when it was never created
  ::rmdir(folder_.c_str());
}

Status TemporaryFile::Commit() {
  if (Status s = FsyncPath(path_, O_RDONLY); !s.ok()) return s;
  if (std::rename(path_.c_str(), target_.c_str()) != 0) {
    return Status::IOError("rename " + path_ + " -> " + target_ + ": " + std::strerror(errno));
  }
  committed_ = true;
  const std::string dir = std::filesystem::path(target_).parent_path().string();
  return FsyncPath(dir.empty() ? "." : dir, O_RDONLY | O_DIRECTORY);
}

Status WriteFileAtomically(const std::string& path, const std::string& contents) {
  TemporaryFile temporary(path);
  std::FILE* f = std::fopen(temporary.path().c_str(), "wb");
  if (f == nullptr) return Status::IOError(temporary.path() + ": " + std::strerror(errno));
  const bool written = std::fwrite(contents.data(), 1, contents.size(), f) == contents.size();
  const bool closed = std::fclose(f) == 0;
  if (!written || !closed) return Status::IOError(temporary.path() + ": write failed");
  return temporary.Commit();
}

}  // namespace trainerd
