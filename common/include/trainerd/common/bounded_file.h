// Reading a file that someone else wrote (a model folder's config.json or shard index, an
// outcome file, a cache file) without trusting what is at its path: a FIFO would block the
// reader until someone writes it, a device or a huge file would be read without end.
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <string>

#include "trainerd/common/status.h"

namespace trainerd {

// The whole of `path` if it is a regular file (after symlinks) of at most `max_bytes`.
// NotFound when there is nothing at `path`; InvalidArgument naming the path for anything
// that is not a regular file (a FIFO is refused without blocking) or is larger; IOError when
// it cannot be opened or read.
Result<std::string> ReadBoundedFile(const std::string& path, std::size_t max_bytes);

}  // namespace trainerd
