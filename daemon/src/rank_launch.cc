#include "trainerd/daemon/rank_launch.h"

#include <unistd.h>

#include <cstdio>
#include <sstream>

namespace trainerd::daemon {
namespace {

std::string Seconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%gs", seconds);
  return text;
}

}  // namespace

Result<std::string> FindExecutable(const std::string& name, const std::string& search_path) {
  std::istringstream folders(search_path);
  std::string folder;
  while (std::getline(folders, folder, ':')) {
    const std::string candidate = (folder.empty() ? "." : folder) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return Status::NotFound(name + " is not an executable in any folder of PATH (" + search_path +
                          ")");
}

Result<std::vector<std::string>> RankLaunchCommand(const DistributedSpec& distributed,
                                                   const std::string& trainer_launch_path,
                                                   const std::vector<std::string>& worker,
                                                   const std::string& search_path) {
  if (distributed.ranks == 1) return worker;
  const std::string ranks = std::to_string(distributed.ranks);
  std::vector<std::string> argv;
  if (distributed.launcher == Launcher::kLocal) {
    argv = {trainer_launch_path,
            "--ranks",
            ranks,
            "--stop-timeout",
            Seconds(distributed.timeout_seconds),
            "--"};
  } else {
    const bool torchrun = distributed.launcher == Launcher::kTorchrun;
    std::string program = distributed.launcher_path;
    if (program.empty()) {
      Result<std::string> found = FindExecutable(torchrun ? "torchrun" : "srun", search_path);
      if (!found.ok()) {
        return Status::NotFound(
            "distributed.launcher: " + std::string(ToString(distributed.launcher)) + ": " +
            found.status().message() + "; set distributed.launcher_path");
      }
      program = *found;
    }
    argv = {program, torchrun ? "--no_python" : "--kill-on-bad-exit=1"};
    if (!distributed.launcher_args.empty()) {
      argv.insert(argv.end(), distributed.launcher_args.begin(), distributed.launcher_args.end());
    } else if (torchrun) {
      argv.insert(argv.end(), {"--standalone", "--nproc_per_node=" + ranks});
    } else {
      argv.push_back("--ntasks=" + ranks);
    }
  }
  argv.insert(argv.end(), worker.begin(), worker.end());
  return argv;
}

}  // namespace trainerd::daemon
