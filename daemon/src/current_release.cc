#include "trainerd/daemon/current_release.h"

#include <filesystem>

#include "trainerd/daemon/state_layout.h"

namespace trainerd::daemon {

Status LinkCurrentRelease(FileStore& files, const std::string& state_dir,
                          const std::string& artifact_path) {
  const std::filesystem::path link = StateLayout(state_dir).CurrentReleaseLink();
  const std::filesystem::path artifact(artifact_path);
  const std::filesystem::path folder = artifact.parent_path();
  const std::filesystem::path target =
      folder.lexically_normal() == link.parent_path().lexically_normal() ? artifact : folder;
  return files.ReplaceSymlink(link.string(),
                              target.lexically_relative(link.parent_path()).string());
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
