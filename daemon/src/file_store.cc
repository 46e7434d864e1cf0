#include "trainerd/daemon/file_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "trainerd/common/atomic_file.h"
#include "trainerd/common/sha256.h"

namespace trainerd::daemon {

Result<std::string> LocalFileStore::Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return std::filesystem::exists(path) ? Status::IOError(path + ": cannot read")
                                         : Status::NotFound(path + ": no such file");
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return Status::IOError(path + ": read failed");
  return text.str();
}

Status LocalFileStore::WriteAtomically(const std::string& path, const std::string& contents) {
  return WriteFileAtomically(path, contents);
}

Result<std::string> LocalFileStore::CopyVerified(const std::string& source,
                                                 const std::string& destination,
                                                 const std::string& expected_sha256) {
  std::ifstream in(source, std::ios::binary);
  if (!in) {
    return std::filesystem::exists(source) ? Status::IOError(source + ": cannot read")
                                           : Status::NotFound(source + ": no such file");
  }
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(destination).parent_path(), ec);
  TemporaryFile temporary(destination);
  std::ofstream out(temporary.path(), std::ios::binary | std::ios::trunc);
  if (!out) return Status::IOError(temporary.path() + ": cannot create");
  Sha256 hasher;
  std::vector<char> chunk(1 << 20);
  while (in) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    const auto n = static_cast<std::size_t>(in.gcount());
    hasher.Update(chunk.data(), n);
    out.write(chunk.data(), static_cast<std::streamsize>(n));
  }
  if (in.bad()) return Status::IOError(source + ": read failed");
  out.close();
  if (!out) return Status::IOError(temporary.path() + ": write failed");
  const std::string sha = hasher.HexDigest();
  if (sha != expected_sha256) {
    return Status::Corruption(source + ": SHA-256 " + sha.substr(0, 12) + " is not the expected " +
                              expected_sha256.substr(0, 12));
  }
  if (Status s = temporary.Commit(); !s.ok()) return s;
  return sha;
}

void LocalFileStore::Remove(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

namespace {

// fsync of the folder `path`: a rename in it survives a crash.
Status SyncFolder(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::IOError(path + ": cannot open to sync: " + std::strerror(errno));
  const bool synced = ::fsync(fd) == 0;
  ::close(fd);
  return synced ? Status::Ok() : Status::IOError(path + ": fsync failed: " + std::strerror(errno));
}

}  // namespace

Status LocalFileStore::PlaceFolder(const std::string& staged, const std::string& folder) {
  std::error_code ec;
  std::filesystem::remove_all(folder, ec);
  if (ec) return Status::IOError(folder + ": cannot remove what is there: " + ec.message());
  std::filesystem::rename(staged, folder, ec);
  if (ec) return Status::IOError(folder + ": cannot put " + staged + " in place: " + ec.message());
  return SyncFolder(std::filesystem::path(folder).parent_path().string());
}

Status LocalFileStore::ReplaceSymlink(const std::string& link, const std::string& target) {
  const std::string temporary = link + ".tmp-" + std::to_string(::getpid());
  std::error_code ec;
  std::filesystem::remove(temporary, ec);
  std::filesystem::create_symlink(target, temporary, ec);
  if (ec)
    return Status::IOError(temporary + ": cannot create a link to " + target + ": " + ec.message());
  std::filesystem::rename(temporary, link, ec);
  if (ec) {
    std::filesystem::remove(temporary, ec);
    return Status::IOError(link + ": cannot replace it: " + ec.message());
  }
  return SyncFolder(std::filesystem::path(link).parent_path().string());
}

}  // namespace trainerd::daemon
