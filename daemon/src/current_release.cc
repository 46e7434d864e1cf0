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

}  // namespace trainerd::daemon
