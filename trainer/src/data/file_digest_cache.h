// What one streaming pass over a large data file learns (its SHA-256 and its largest token
// id), cached in a JSON file by (canonical path, size, mtime), so the nightly job streams a
// multi-gigabyte dataset once and not every night. The largest id is cached per scan (what
// was read as ids: uint16 or uint32 tokens, which tensor of a .safetensors file), so the same
// bytes read another way are scanned again. A changed size or mtime recomputes; a missing,
// unreadable or corrupt cache only costs the pass. Not safe for two writers at once (the last
// one wins; both entries are correct).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "trainerd/common/status.h"

namespace trainerd {

struct FileDigest {
  std::string sha256;
  std::int64_t max_token = -1;  // -1 without a scan
  bool from_cache = false;      // true when the cache answered, false when the file was streamed
};

// One pass over the file's bytes: `scan` sees every chunk in order and returns the largest
// token id in it.
using ChunkScan = std::function<std::int64_t(const unsigned char* data, std::size_t size)>;

// The digest of `path`, from `cache_file` when it holds an entry of this size and mtime (and
// the largest id of `scan_key`), else computed by streaming the file through SHA-256 and
// `scan` (then stored). `scan_key` names what `scan` reads ("uint16 tokens", "int64 tensor
// 'targets' at bytes 128+4096"); "" for no scan (`scan` is not called). An empty cache_file
// disables caching.
Result<FileDigest> DigestFile(const std::string& path, const std::string& scan_key,
                              const ChunkScan& scan, const std::string& cache_file);

}  // namespace trainerd
