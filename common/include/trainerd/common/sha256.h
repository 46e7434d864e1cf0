// SHA-256 (FIPS 180-4), used for content hashes: config versions, data fingerprints and
// model artifacts. Incremental; not thread-safe per instance.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "trainerd/common/status.h"

namespace trainerd {

class Sha256 {
 public:
  Sha256();
  void Update(const void* data, std::size_t size);
  void Update(std::string_view text) { Update(text.data(), text.size()); }
  // Lower-case hex digest (64 characters). The hasher must not be updated afterwards.
  std::string HexDigest();

 private:
  void Compress(const std::uint8_t* block);

  std::array<std::uint32_t, 8> state_;
  std::array<std::uint8_t, 64> buffer_{};
  std::size_t buffered_ = 0;
  std::uint64_t total_bytes_ = 0;
};

std::string Sha256Hex(std::string_view data);
// Hash of a whole file's bytes; IOError naming the path when it cannot be read.
Result<std::string> Sha256File(const std::string& path);
// A file's hash, or a folder's: Sha256Files of every regular file of it, subfolders included.
Result<std::string> Sha256Path(const std::string& path);
// The hash of the files `names` (relative to `folder`): of each one's name and hash, in name
// order. IOError naming a file that cannot be read.
Result<std::string> Sha256Files(const std::string& folder, std::vector<std::string> names);

}  // namespace trainerd
