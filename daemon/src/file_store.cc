#include "trainerd/daemon/file_store.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "trainerd/common/atomic_file.h"

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

void LocalFileStore::Remove(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove(path, ec);
}

}  // namespace trainerd::daemon
