// What one streaming pass over a large data file learns (its SHA-256 and its largest token
// id), cached in a JSON file by (canonical path, size, mtime), so the nightly job streams a
// multi-gigabyte dataset once and not every night. A changed size or mtime recomputes; a
// missing, unreadable or corrupt cache only costs the pass. Not safe for two writers at once
// (the last one wins; both entries are correct).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "trainerd/common/status.h"

namespace trainerd {

struct FileDigest {
  std::string sha256;
  std::int64_t max_token = 0;
  bool from_cache = false;  // true when the cache answered, false when the file was streamed
};

// One pass over the file's bytes: `scan` sees every chunk in order and returns the largest
// token id in it.
using ChunkScan = std::function<std::int64_t(const unsigned char* data, std::size_t size)>;

// The digest of `path`, from `cache_file` when it holds an entry of this size and mtime,
// else computed by streaming the file through SHA-256 and `scan` (then stored). An empty
// cache_file disables caching.
Result<FileDigest> DigestFile(const std::string& path, const ChunkScan& scan,
                              const std::string& cache_file);

}  // namespace trainerd
