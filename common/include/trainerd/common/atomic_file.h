// Crash-safe replacement of a file: write to a temporary path next to the target, then
// CommitFile() fsyncs it, renames it over the target and fsyncs the directory, so a reader
// (or a restart after power loss) sees either the old file or the complete new one.
#pragma once

#include <string>

#include "trainerd/common/status.h"

namespace trainerd {

// "<path>.tmp": the temporary name used while `path` is being written.
std::string TemporaryPathFor(const std::string& path);

// REQUIRES: `temporary_path` is complete and closed, on the same filesystem as `path`.
Status CommitFile(const std::string& temporary_path, const std::string& path);

// Writes `contents` to `path` atomically.
Status WriteFileAtomically(const std::string& path, const std::string& contents);

}  // namespace trainerd
