#include "trainerd/daemon/rank_launch.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "../support/temp_dir.h"

namespace trainerd::daemon {
namespace {

using Argv = std::vector<std::string>;

const Argv kWorker = {"/usr/bin/trainer-run", "--config", "job.yaml"};

DistributedSpec Ranks(int ranks, Launcher launcher) {
  DistributedSpec spec;
  spec.ranks = ranks;
  spec.launcher = launcher;
  spec.timeout_seconds = 90;
  return spec;
}

TEST(RankLaunchTest, OneRankRunsTheWorkerAsItIs) {
  EXPECT_EQ(*RankLaunchCommand(Ranks(1, Launcher::kSlurm), "/l/trainer-launch", kWorker, ""),
            kWorker);
}

TEST(RankLaunchTest, LocalRanksRunUnderTrainerLaunchWithTheJobsTimeout) {
  EXPECT_EQ(*RankLaunchCommand(Ranks(2, Launcher::kLocal), "/l/trainer-launch", kWorker, ""),
            (Argv{"/l/trainer-launch", "--ranks", "2", "--stop-timeout", "90s", "--",
                  "/usr/bin/trainer-run", "--config", "job.yaml"}));
}

TEST(RankLaunchTest, TorchrunAndSrunAreFoundOnThePathWithDefaultPlacement) {
  testing::TempDir dir;
  for (const char* name : {"torchrun", "srun"}) {
    const std::string path = dir.Write(name, "#!/bin/sh\n");
    ::chmod(path.c_str(), 0755);
  }
  const std::string search = "/nonexistent:" + dir.path().string();
  EXPECT_EQ(*RankLaunchCommand(Ranks(4, Launcher::kTorchrun), "", kWorker, search),
            (Argv{dir.File("torchrun"), "--no_python", "--standalone", "--nproc_per_node=4",
                  "/usr/bin/trainer-run", "--config", "job.yaml"}));
  EXPECT_EQ(*RankLaunchCommand(Ranks(4, Launcher::kSlurm), "", kWorker, search),
            (Argv{dir.File("srun"), "--kill-on-bad-exit=1", "--ntasks=4", "/usr/bin/trainer-run",
                  "--config", "job.yaml"}));
}

TEST(RankLaunchTest, LauncherArgsReplaceThePlacementAndLauncherPathTheSearch) {
  DistributedSpec spec = Ranks(8, Launcher::kTorchrun);
  spec.launcher_path = "/opt/torch/bin/torchrun";
  spec.launcher_args = {"--nnodes=2", "--nproc_per_node=4", "--rdzv_endpoint=n1:29400"};
  EXPECT_EQ(*RankLaunchCommand(spec, "", kWorker, ""),
            (Argv{"/opt/torch/bin/torchrun", "--no_python", "--nnodes=2", "--nproc_per_node=4",
                  "--rdzv_endpoint=n1:29400", "/usr/bin/trainer-run", "--config", "job.yaml"}));
}

TEST(RankLaunchTest, ALauncherNotOnThePathIsNotFoundNamingItAndThePath) {
  const Result<Argv> argv =
      RankLaunchCommand(Ranks(2, Launcher::kSlurm), "", kWorker, "/nonexistent:/also-not");
  ASSERT_FALSE(argv.ok());
  EXPECT_EQ(argv.status().code(), Status::Code::kNotFound);
  EXPECT_NE(argv.status().message().find("distributed.launcher: slurm: srun is not an executable "
                                         "in any folder of PATH (/nonexistent:/also-not)"),
            std::string::npos)
      << argv.status().message();
}

}  // namespace
}  // namespace trainerd::daemon
