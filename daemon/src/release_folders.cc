#include "trainerd/daemon/release_folders.h"

#include <filesystem>
#include <set>

#include "trainerd/daemon/state_layout.h"

namespace trainerd::daemon {
namespace {

namespace fs = std::filesystem;

constexpr const char* kStagingPrefix = ".staging-";

}  // namespace

std::string ReleaseFilesPath(const store::Release& release) {
  const fs::path artifact(release.artifact_path);
  const fs::path folder = artifact.parent_path();
  return folder.filename().string().rfind("run-", 0) == 0 ? folder.string() : artifact.string();
}

std::string CompanionName(const std::string& weights, const std::string& companion) {
  const fs::path beside = fs::path(weights).parent_path().lexically_normal();
  const fs::path source = fs::path(companion).lexically_normal();
  const fs::path relative = source.lexically_relative(beside);
  const bool inside = !relative.empty() && *relative.begin() != ".." && relative != ".";
  const std::string name = inside ? relative.string() : source.filename().string();
  return name == "." || name == ".." ? "" : name;
}

Status StageReleaseFolder(FileStore& files, const std::string& folder,
                          const std::function<Status(const std::string& staging)>& fill) {
  const fs::path target(folder);
  const std::string staging =
      (target.parent_path() / (kStagingPrefix + target.filename().string())).string();
  files.Remove(staging);  // a stale one of a killed publish
  std::error_code ec;
  fs::create_directories(staging, ec);
  if (ec) return Status::IOError(staging + ": cannot create: " + ec.message());
  Status status = fill(staging);
  if (status.ok()) status = files.PlaceFolder(staging, folder);
  if (!status.ok()) files.Remove(staging);
  return status;
}

Result<std::vector<std::string>> CollectReleaseOrphans(store::Store& store, FileStore& files,
                                                       const std::string& state_dir) {
  Result<std::vector<store::Release>> releases = store.ListReleases(1'000'000);
  if (!releases.ok()) return releases.status();
  // By name (run-<id>-<sha12>, unique per run): a database and state directory copied to
  // another path name the old one, and their folders are no orphans.
  std::set<std::string> named;
  for (const store::Release& r : *releases) {
    named.insert(fs::path(ReleaseFilesPath(r)).filename().string());
  }
  const StateLayout layout(state_dir);
  const fs::path releases_dir = fs::path(layout.CurrentReleaseLink()).parent_path();
  std::vector<std::string> removed;
  for (const fs::path& dir : {releases_dir, releases_dir / "rejected"}) {
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      const bool staging = name.rfind(kStagingPrefix, 0) == 0;
      const bool orphan = name.rfind("run-", 0) == 0 && named.count(name) == 0;
      if (!staging && !orphan) continue;
      files.Remove(it->path().string());
      removed.push_back(it->path().string());
    }
  }
  return removed;
}

}  // namespace trainerd::daemon
