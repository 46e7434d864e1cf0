// The file operations of the nightly cycle (the job file, config copies, the plan file, the
// published model artifact, the finished checkpoint), behind an interface so that tests can
// inject faults: a full disk when the model is published, an unreadable job file.
#pragma once

#include <string>

#include "trainerd/common/status.h"

namespace trainerd::daemon {

class FileStore {
 public:
  virtual ~FileStore() = default;
  // The whole file; NotFound or IOError naming the path.
  virtual Result<std::string> Read(const std::string& path) = 0;
  // Replaces `path` atomically (temporary file, fsync, rename).
  virtual Status WriteAtomically(const std::string& path, const std::string& contents) = 0;
  // Copies `source` to `destination` atomically in fixed-size chunks, hashing as it reads, and
  // puts the copy in place only when its SHA-256 is `expected_sha256` (else Corruption, and
  // nothing is written). Creates the destination's folder. Returns the hash. Memory use
  // does not grow with the file.
  virtual Result<std::string> CopyVerified(const std::string& source,
                                           const std::string& destination,
                                           const std::string& expected_sha256) = 0;
  // Removes `path` if it exists: a file, or a folder with everything in it.
  virtual void Remove(const std::string& path) = 0;
  // Makes `link` a symbolic link to `target` (relative to the link's folder), replacing what
  // was there atomically (a temporary link renamed over it): a reader sees the old target
  // or the new one, never none.
  virtual Status ReplaceSymlink(const std::string& link, const std::string& target) = 0;
  // Puts the complete folder `staged` in place as `folder` (a rename in one filesystem; a
  // folder already at `folder`, left by a killed publish, is removed first) and fsyncs their
  // parent: a reader, or a restart after a crash, sees no folder or the whole one.
  virtual Status PlaceFolder(const std::string& staged, const std::string& folder) = 0;
};

// The local filesystem.
class LocalFileStore final : public FileStore {
 public:
  Result<std::string> Read(const std::string& path) override;
  Status WriteAtomically(const std::string& path, const std::string& contents) override;
  Result<std::string> CopyVerified(const std::string& source, const std::string& destination,
                                   const std::string& expected_sha256) override;
  void Remove(const std::string& path) override;
  Status ReplaceSymlink(const std::string& link, const std::string& target) override;
  Status PlaceFolder(const std::string& staged, const std::string& folder) override;
};

}  // namespace trainerd::daemon
