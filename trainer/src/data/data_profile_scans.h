// The scans that learn a dataset's profile (spec/worker_protocol.h, DataProfile) in the pass
// that hashes its files (file_digest_cache.h), and what their cached results say. Each
// format's dataset adds its files' results into its profile.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "data/file_digest_cache.h"
#include "trainerd/common/array_file.h"
#include "trainerd/trainer/data/mapped_file.h"
#include "trainerd/trainer/spec/worker_protocol.h"

namespace trainerd {

// Counts of non-negative integer ids (negative ones, an ignored target, are skipped), the
// last bin holding every id from kMaxCountedIds on, and the largest id seen.
class IdHistogram {
 public:
  void Add(std::int64_t id);
  std::int64_t largest() const { return largest_; }
  const std::vector<std::int64_t>& counts() const { return counts_; }
  // {"largest": N, "counts": [...]}, what the digest cache keeps.
  nlohmann::json ToJson() const;
  // None when `json` is not what ToJson writes (a cache edited by hand).
  static std::optional<IdHistogram> FromJson(const nlohmann::json& json);
  // Adds `other`'s counts into `counts` (grown as needed).
  static void AddInto(const std::vector<std::int64_t>& other, std::vector<std::int64_t>* counts);

 private:
  std::int64_t largest_ = -1;
  std::vector<std::int64_t> counts_;
};

// Little-endian token ids of `width` bytes (tokens: uint16, uint32), chunk by chunk.
std::unique_ptr<FileScan> TokenIdScan(int width);

// The integer elements of `array` in `file` (class targets), counted as the file streams.
std::unique_ptr<FileScan> IntegerArrayScan(const MappedFile& file, const ArrayView& array);

// The floating-point rows of `array` in `file`, from the mapping once the file has streamed:
// {"rows_not_finite": N, "columns": [{mean, spread}, ...]} with the first
// kMaxProfiledColumns columns when `columns` is true.
std::unique_ptr<FileScan> FloatRowsScan(const MappedFile& file, const ArrayView& array,
                                        bool columns);

// Several scans in one pass over a file, each under its name; the result is an object of
// their results by name, cached under the names joined (key()).
class ScanSet : public FileScan {
 public:
  void Add(const std::string& name, std::unique_ptr<FileScan> scan);
  bool empty() const { return scans_.empty(); }
  std::string key() const;
  void Chunk(const unsigned char* data, std::size_t size) override;
  nlohmann::json Result() override;

 private:
  std::vector<std::pair<std::string, std::unique_ptr<FileScan>>> scans_;
};

}  // namespace trainerd
