#include "trainerd/trainer/file_digest_cache.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
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

}  // namespace

Result<FileDigest> DigestFile(const std::string& path, const ChunkScan& scan,
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
    const nlohmann::json& entry = cache[name];
    if (entry.is_object() && entry.value("size", std::int64_t{-1}) == key["size"] &&
        entry.value("mtime_ns", std::int64_t{-1}) == key["mtime_ns"] && entry.contains("sha256") &&
        entry["sha256"].is_string() && entry.contains("max_token") &&
        entry["max_token"].is_number_integer()) {
      return FileDigest{entry["sha256"], entry["max_token"], true};
    }
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
    digest.max_token =
        std::max(digest.max_token, scan(reinterpret_cast<const unsigned char*>(chunk.data()), n));
  }
  if (in.bad()) return Status::IOError(path + ": read failed while hashing");
  digest.sha256 = hasher.HexDigest();
  if (!cache_file.empty()) {
    nlohmann::json entry = key;
    entry["sha256"] = digest.sha256;
    entry["max_token"] = digest.max_token;
    cache[name] = entry;
    std::filesystem::create_directories(std::filesystem::path(cache_file).parent_path(), ec);
    (void)WriteFileAtomically(cache_file, cache.dump(1));  // a cache: failing to write is no error
  }
  return digest;
}

}  // namespace trainerd
