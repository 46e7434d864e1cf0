#include "data/file_digest_cache.h"

#include <sys/stat.h>

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

// entry[name] when it is a string, else none: a cache edited by hand is no error.
std::optional<std::string> StringAt(const nlohmann::json& entry, const std::string& name) {
  const auto it = entry.find(name);
  if (it == entry.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

// The cached digest in `entry` for a file of `key` (size, mtime) and `scan_key`, if any.
std::optional<FileDigest> Cached(const nlohmann::json& entry, const nlohmann::json& key,
                                 const std::string& scan_key) {
  if (!entry.is_object() || entry.value("size", nlohmann::json()) != key["size"] ||
      entry.value("mtime_ns", nlohmann::json()) != key["mtime_ns"]) {
    return std::nullopt;
  }
  const std::optional<std::string> sha256 = StringAt(entry, "sha256");
  if (!sha256) return std::nullopt;
  FileDigest digest{*sha256, nullptr, true};
  if (scan_key.empty()) return digest;
  const auto scans = entry.find("scans");
  if (scans == entry.end() || !scans->is_object() || !scans->contains(scan_key)) {
    return std::nullopt;
  }
  digest.scanned = (*scans)[scan_key];
  return digest;
}

}  // namespace

Result<FileDigest> DigestFile(const std::string& path, const std::string& scan_key, FileScan* scan,
                              const std::string& cache_file) {
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
  std::vector<char> chunk(1 << 20);
  while (in) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    const auto n = static_cast<std::size_t>(in.gcount());
    hasher.Update(chunk.data(), n);
    if (scan != nullptr) scan->Chunk(reinterpret_cast<const unsigned char*>(chunk.data()), n);
  }
  if (in.bad()) return Status::IOError(path + ": read failed while hashing");
  FileDigest digest{hasher.HexDigest(), scan != nullptr ? scan->Result() : nullptr, false};
  if (!cache_file.empty()) {
    // Scans of the same bytes another way stay beside this one.
    nlohmann::json entry = key;
    const bool same_bytes = cache.contains(name) && cache[name].is_object() &&
                            StringAt(cache[name], "sha256") == digest.sha256 &&
                            cache[name].contains("scans") && cache[name]["scans"].is_object();
    entry["sha256"] = digest.sha256;
    entry["scans"] = same_bytes ? cache[name]["scans"] : nlohmann::json::object();
    if (scan != nullptr) entry["scans"][scan_key] = digest.scanned;
    cache[name] = entry;
    std::filesystem::create_directories(std::filesystem::path(cache_file).parent_path(), ec);
    (void)WriteFileAtomically(cache_file, cache.dump(1));  // a cache: failing to write is no error
  }
  return digest;
}

}  // namespace trainerd
