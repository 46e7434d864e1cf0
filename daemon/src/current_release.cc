#include "trainerd/daemon/current_release.h"

#include <filesystem>

#include "trainerd/daemon/release_folders.h"
#include "trainerd/daemon/state_layout.h"

namespace trainerd::daemon {

Status SyncCurrentReleaseLink(store::Store& store, FileStore& files, const std::string& state_dir) {
  const std::filesystem::path link = StateLayout(state_dir).CurrentReleaseLink();
  Result<std::optional<store::Release>> current = store.CurrentRelease();
  if (!current.ok()) return current.status();
  if (!*current) {
    std::error_code ec;
    if (std::filesystem::is_symlink(std::filesystem::symlink_status(link, ec))) {
      files.Remove(link.string());
    }
    return Status::Ok();
  }
  // By name, relative to releases/: a state directory moved or copied elsewhere, whose
  // records name the old path, links to its own folders.
  const std::filesystem::path files_path = ReleaseFilesPath(**current);
  const std::string name = files_path.filename().string();
  const std::string relative =
      files_path.parent_path().filename() == "rejected" ? "rejected/" + name : name;
  std::error_code ec;
  if (std::filesystem::read_symlink(link, ec) == relative && !ec) return Status::Ok();
  return files.ReplaceSymlink(link.string(), relative);
}

std::optional<std::string> CurrentReleaseWeights(const std::string& state_dir) {
  std::error_code ec;
  const std::filesystem::path folder =
      std::filesystem::canonical(StateLayout(state_dir).CurrentReleaseLink(), ec);
  if (ec || !std::filesystem::is_directory(folder, ec)) return std::nullopt;
  const std::filesystem::path weights = folder / "model.safetensors";
  if (!std::filesystem::is_regular_file(weights, ec)) return std::nullopt;
  return weights.string();
}

}  // namespace trainerd::daemon
