#include "trainerd/common/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

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

std::string TemporaryPathFor(const std::string& path) { return path + ".tmp"; }

Status CommitFile(const std::string& temporary_path, const std::string& path) {
  if (Status s = FsyncPath(temporary_path, O_RDONLY); !s.ok()) return s;
  if (std::rename(temporary_path.c_str(), path.c_str()) != 0) {
    return Status::IOError("rename " + temporary_path + " -> " + path + ": " +
                           std::strerror(errno));
  }
  std::string dir = std::filesystem::path(path).parent_path().string();
  return FsyncPath(dir.empty() ? "." : dir, O_RDONLY | O_DIRECTORY);
}

Status WriteFileAtomically(const std::string& path, const std::string& contents) {
  const std::string temporary = TemporaryPathFor(path);
  std::FILE* f = std::fopen(temporary.c_str(), "wb");
  if (f == nullptr) return Status::IOError(temporary + ": " + std::strerror(errno));
  const bool written = std::fwrite(contents.data(), 1, contents.size(), f) == contents.size();
  const bool closed = std::fclose(f) == 0;
  if (!written || !closed) return Status::IOError(temporary + ": write failed");
  return CommitFile(temporary, path);
}

}  // namespace trainerd
