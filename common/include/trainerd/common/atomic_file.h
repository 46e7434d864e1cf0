// Crash-safe replacement of a file: write to a temporary file next to the target, then
// Commit() fsyncs it, renames it over the target and fsyncs the directory, so a reader (or a
// restart after power loss) sees either the old file or the complete new one.
#pragma once

#include <string>

#include "trainerd/common/status.h"

namespace trainerd {

// A temporary file beside `target`, named uniquely per process and call
// ("<target>.tmp.<pid>.<n>"), so two writers of one target never share it. Removed when
// destroyed unless Commit() put it in place: a failed or abandoned write leaves nothing.
// Not thread-safe (one writer per object); the name counter is.
class TemporaryFile {
 public:
  explicit TemporaryFile(std::string target);
  ~TemporaryFile();
  TemporaryFile(const TemporaryFile&) = delete;
  TemporaryFile& operator=(const TemporaryFile&) = delete;

  // Where to write. REQUIRES: complete and closed before Commit().
  const std::string& path() const { return path_; }
  // fsync, rename over the target, fsync the directory. On failure the temporary is removed.
  Status Commit();

 private:
  std::string target_;
  std::string path_;
  bool committed_ = false;
};

// Writes `contents` to `path` atomically.
Status WriteFileAtomically(const std::string& path, const std::string& contents);

}  // namespace trainerd
