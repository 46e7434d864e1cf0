#include "trainerd/daemon/current_release.h"

#include <filesystem>

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
  const std::filesystem::path artifact((*current)->artifact_path);
  const std::filesystem::path folder = artifact.parent_path();
  const std::filesystem::path target =
      folder.lexically_normal() == link.parent_path().lexically_normal() ? artifact : folder;
  const std::string relative = target.lexically_relative(link.parent_path()).string();
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
