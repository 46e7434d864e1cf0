#include "data/file_digest_cache.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "trainerd/common/atomic_file.h"
#include "trainerd/common/sha256.h"

namespace trainerd {
namespace {

nlohmann::json ReadCache(const std::string& cache_file) {
  std::ifstream in(cache_file);
  if (!in) return nlohmann::json::object();
  nlohmann::json cache = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  return cache.is_object() ? cache : nlohmann::json::object();
}

// entry[name] when it is an integer (a string), else none: a cache edited by hand is no error.
std::optional<std::int64_t> IntegerAt(const nlohmann::json& entry, const std::string& name) {
  const auto it = entry.find(name);
  if (it == entry.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<std::int64_t>();
}
std::optional<std::string> StringAt(const nlohmann::json& entry, const std::string& name) {
  const auto it = entry.find(name);
  if (it == entry.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

// The cached digest in `entry` for a file of `key` (size, mtime) and `scan_key`, if any.
std::optional<FileDigest> Cached(const nlohmann::json& entry, const nlohmann::json& key,
                                 const std::string& scan_key) {
  if (!entry.is_object() || IntegerAt(entry, "size") != key["size"].get<std::int64_t>() ||
      IntegerAt(entry, "mtime_ns") != key["mtime_ns"].get<std::int64_t>()) {
    return std::nullopt;
  }
  const std::optional<std::string> sha256 = StringAt(entry, "sha256");
  if (!sha256) return std::nullopt;
  FileDigest digest{*sha256, -1, true};
  if (scan_key.empty()) return digest;
  const auto largest = entry.find("largest");
  if (largest == entry.end() || !largest->is_object()) return std::nullopt;
  const std::optional<std::int64_t> max_token = IntegerAt(*largest, scan_key);
  if (!max_token) return std::nullopt;
  digest.max_token = *max_token;
  return digest;
}

}  // namespace

Result<FileDigest> DigestFile(const std::string& path, const std::string& scan_key,
                              const ChunkScan& scan, const std::string& cache_file) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Status::IOError(path + ": cannot stat");
  const nlohmann::json key = {
      {"size", static_cast<std::int64_t>(st.st_size)},
      {"mtime_ns", static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec}};
  std::error_code ec;
  const std::string name = std::filesystem::weakly_canonical(path, ec).string();
  nlohmann::json cache = cache_file.empty() ? nlohmann::json::object() : ReadCache(cache_file);
  if (cache.contains(name)) {
    if (std::optional<FileDigest> cached = Cached(cache[name], key, scan_key)) return *cached;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::IOError(path + ": cannot open for hashing");
  Sha256 hasher;
  FileDigest digest;
  std::vector<char> chunk(1 << 20);
  while (in) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    const auto n = static_cast<std::size_t>(in.gcount());
    hasher.Update(chunk.data(), n);
    if (scan_key.empty()) continue;
    digest.max_token =
        std::max(digest.max_token, scan(reinterpret_cast<const unsigned char*>(chunk.data()), n));
  }
  if (in.bad()) return Status::IOError(path + ": read failed while hashing");
  digest.sha256 = hasher.HexDigest();
  if (!cache_file.empty()) {
    // Scans of the same bytes another way stay beside this one.
    nlohmann::json entry = key;
    const bool same_bytes = cache.contains(name) && cache[name].is_object() &&
                            StringAt(cache[name], "sha256") == digest.sha256 &&
                            cache[name].contains("largest") && cache[name]["largest"].is_object();
    entry["sha256"] = digest.sha256;
    entry["largest"] = same_bytes ? cache[name]["largest"] : nlohmann::json::object();
    if (!scan_key.empty()) entry["largest"][scan_key] = digest.max_token;
    cache[name] = entry;
    std::filesystem::create_directories(std::filesystem::path(cache_file).parent_path(), ec);
    (void)WriteFileAtomically(cache_file, cache.dump(1));  // a cache: failing to write is no error
  }
  return digest;
}

}  // namespace trainerd
