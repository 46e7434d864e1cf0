// Crash-safe replacement of a file: write to a temporary file next to the target, then
// Commit() fsyncs it, renames it over the target and fsyncs the directory, so a reader (or a
// restart after power loss) sees either the old file or the complete new one.
#pragma once

#include <string>

#include "trainerd/common/status.h"

namespace trainerd {

// A temporary file with the target's own name in a folder beside `target` that is unique per
// process and call ("<target>.tmp.<pid>.<n>/<target's name>"), so two writers of one target
// never share it, and a format that records its file's name (LibTorch's zip archives name
// their root folder after it) writes the same bytes as if it wrote the target itself: a
// model saved twice from the same weights has one hash. File and folder are removed when
// destroyed unless Commit() put the file in place: a failed or abandoned write leaves
// nothing. Not thread-safe (one writer per object); the name counter is.
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
  std::string folder_;
  std::string path_;
  bool committed_ = false;
};

// Writes `contents` to `path` atomically.
Status WriteFileAtomically(const std::string& path, const std::string& contents);

}  // namespace trainerd
