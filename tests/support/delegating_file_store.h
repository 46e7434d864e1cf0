// A FileStore on the local filesystem whose operations a test fake overrides one at a time
// (a full disk, a kill between two steps): the others stay the real ones.
#pragma once

#include <string>

#include "trainerd/daemon/file_store.h"

namespace trainerd::testing {

class DelegatingFileStore : public daemon::FileStore {
 public:
  Result<std::string> Read(const std::string& path) override { return real_.Read(path); }
  Status WriteAtomically(const std::string& path, const std::string& contents) override {
    return real_.WriteAtomically(path, contents);
  }
  Result<std::string> CopyVerified(const std::string& source, const std::string& destination,
                                   const std::string& expected_sha256) override {
    return real_.CopyVerified(source, destination, expected_sha256);
  }
  void Remove(const std::string& path) override { real_.Remove(path); }
  Status ReplaceSymlink(const std::string& link, const std::string& target) override {
    return real_.ReplaceSymlink(link, target);
  }
  Status PlaceFolder(const std::string& staged, const std::string& folder) override {
    return real_.PlaceFolder(staged, folder);
  }

 private:
  daemon::LocalFileStore real_;
};

}  // namespace trainerd::testing
