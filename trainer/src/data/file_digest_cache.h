// What one streaming pass over a large data file learns (its SHA-256, and what a scan of its
// contents found: the largest token id, each id's count), cached in a JSON file by (canonical
// path, size, mtime), so the nightly job streams a multi-gigabyte dataset once and not every
// night. A scan's result is cached per scan key (what was read as what: uint16 or uint32
// tokens, which tensor of a .safetensors file), so the same bytes read another way are
// scanned again. A changed size or mtime recomputes; a missing, unreadable or corrupt cache
// only costs the pass. Not safe for two writers at once (the last one wins; both entries are
// correct).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "trainerd/common/status.h"

namespace trainerd {

// One pass over a file's contents, beside the hash.
class FileScan {
 public:
  virtual ~FileScan() = default;
  // Every chunk of the file, in order.
  virtual void Chunk(const unsigned char* data, std::size_t size) = 0;
  // What the pass found, as it is cached; called once after the last chunk.
  virtual nlohmann::json Result() = 0;
};

struct FileDigest {
  std::string sha256;
  nlohmann::json scanned;   // the scan's Result(); null without a scan
  bool from_cache = false;  // true when the cache answered, false when the file was streamed
};

// The digest of `path`, from `cache_file` when it holds an entry of this size and mtime (and
// a scan under `scan_key`), else computed by streaming the file through SHA-256 and `scan`
// (then stored). `scan_key` names what `scan` reads ("uint16 tokens", "int64 tensor 'targets'
// at bytes 128+4096"); "" and a null `scan` for no scan. An empty cache_file disables caching.
Result<FileDigest> DigestFile(const std::string& path, const std::string& scan_key, FileScan* scan,
                              const std::string& cache_file);

}  // namespace trainerd
