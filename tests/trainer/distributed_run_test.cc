// trainer-run as the ranks of a data-parallel job under trainer-launch: real processes, real
// signals, loopback Gloo.
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "../support/child_process.h"
#include "../support/event_lines.h"
#include "../support/temp_dir.h"
#include "../support/tiny_job.h"
#include "trainerd/common/cpu_count.h"

namespace trainerd {
namespace {

using testing::ChildProcess;
using testing::Events;

int Count(const std::vector<nlohmann::json>& events, const char* kind) {
  int n = 0;
  for (const auto& e : events) n += e["event"] == kind;
  return n;
}

// The tiny job (effective batch 8) over `ranks` ranks, `microbatch` samples at a time.
std::string Job(int updates, int ranks, int microbatch) {
  testing::TinyGptYamlOptions options;
  options.updates = updates;
  options.eval_interval = 1000;
  options.checkpoint_interval = 1000;
  options.extra = "distributed: {ranks: " + std::to_string(ranks) +
                  ", timeout: 60s}\nplan: {microbatch: " + std::to_string(microbatch) + "}\n";
  return testing::TinyGptYaml(options);
}

std::vector<std::string> Launch(int ranks, const std::vector<std::string>& trainer_args) {
  std::vector<std::string> argv = {TRAINER_LAUNCH_PATH, "--ranks", std::to_string(ranks),
                                   "--stop-timeout",    "20s",     "--",
                                   TRAINER_RUN_PATH};
  argv.insert(argv.end(), trainer_args.begin(), trainer_args.end());
  return argv;
}

double FinalLoss(const std::vector<nlohmann::json>& events) {
  return events.back().value("final_train_loss", -1.0);
}

TEST(DistributedRunTest, TwoRanksTrainTheOneRankJobAndOnlyRankZeroReports) {
  testing::TempDir dir;
  ChildProcess one({TRAINER_RUN_PATH, "--config", dir.Write("one.yaml", Job(6, 1, 8)),
                    "--output-dir", dir.File("one")});
  const auto reference = Events(one.ReadAllLines());
  ASSERT_EQ(one.ExitCode(), 0);

  ChildProcess two(Launch(2, {"--config", dir.Write("two.yaml", Job(6, 2, 2)), "--output-dir",
                              dir.File("two"), "--json"}));
  const auto events = Events(two.ReadAllLines());
  const std::string log = two.ReadAllStderr();
  ASSERT_EQ(two.ExitCode(), 0) << log;
  EXPECT_EQ(Count(events, "start"), 1) << "rank 1 printed events";
  EXPECT_EQ(Count(events, "update"), 6);
  EXPECT_EQ(events.front()["distributed"]["world_size"], 2);
  EXPECT_EQ(events.front()["distributed"]["backend"], "gloo");
  EXPECT_EQ(events.front()["distributed"]["rank_batch"], 4);
  ASSERT_EQ(events.back()["event"], "finish");
  EXPECT_EQ(events.back()["world_size"], 2);
  EXPECT_NEAR(events.back()["samples_per_second_per_rank"].get<double>() * 2,
              events.back()["samples_per_second"].get<double>(), 1e-9);
  EXPECT_NEAR(FinalLoss(events), FinalLoss(reference), 1e-5 * FinalLoss(reference));
  EXPECT_NEAR(events.back()["eval_mean_loss"].get<double>(),
              reference.back()["eval_mean_loss"].get<double>(), 1e-5);
}

TEST(DistributedRunTest, SigtermStopsEveryRankAtOneUpdateAndTheRanksResumeFromItsCheckpoint) {
  testing::TempDir dir;
  constexpr int kUpdates = 300;
  const std::string config = dir.Write("two.yaml", Job(kUpdates, 2, 4));
  const std::string out = dir.File("out");
  int interrupted_at = 0;
  {
    ChildProcess two(Launch(2, {"--config", config, "--output-dir", out, "--json"}));
    while (auto line = two.ReadLine()) {
      if (nlohmann::json::parse(*line)["event"] == "update") break;
    }
    two.Signal(SIGTERM);  // the launcher passes it on to both ranks
    const auto rest = Events(two.ReadAllLines());
    ASSERT_EQ(two.ExitCode(), 75) << two.ReadAllStderr();
    ASSERT_FALSE(rest.empty());
    EXPECT_EQ(rest.back()["event"], "checkpoint");
    interrupted_at = rest.back()["update"];
    ASSERT_LT(interrupted_at, kUpdates) << "the job finished before the signal arrived";
  }
  ChildProcess resumed(Launch(2, {"--config", config, "--output-dir", out, "--resume", "--json"}));
  const auto events = Events(resumed.ReadAllLines());
  ASSERT_EQ(resumed.ExitCode(), 0) << resumed.ReadAllStderr();
  EXPECT_EQ(events.front()["resumed_from_update"], interrupted_at);
  EXPECT_EQ(Count(events, "update"), kUpdates - interrupted_at);

  ChildProcess one({TRAINER_RUN_PATH, "--config", dir.Write("one.yaml", Job(kUpdates, 1, 8)),
                    "--output-dir", dir.File("one")});
  const auto reference = Events(one.ReadAllLines());
  ASSERT_EQ(one.ExitCode(), 0);
  EXPECT_NEAR(FinalLoss(events), FinalLoss(reference), 1e-4 * FinalLoss(reference));
}

TEST(DistributedRunTest, AKilledRankStopsTheOthersAndTheLauncherDiesOfTheSameSignal) {
  testing::TempDir dir;
  ChildProcess two(Launch(2, {"--config", dir.Write("two.yaml", Job(100000, 2, 4)), "--output-dir",
                              dir.File("out"), "--json"}));
  while (auto line = two.ReadLine()) {
    if (nlohmann::json::parse(*line)["event"] == "update") break;
  }
  std::ifstream children("/proc/" + std::to_string(two.pid()) + "/task/" +
                         std::to_string(two.pid()) + "/children");
  pid_t rank0 = 0, rank1 = 0;
  ASSERT_TRUE(children >> rank0 >> rank1);
  ::kill(rank1, SIGKILL);
  two.ReadAllLines();
  const int status = two.Wait();
  const std::string log = two.ReadAllStderr();
  ASSERT_TRUE(WIFSIGNALED(status)) << log;
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
  EXPECT_NE(log.find("rank 1 (pid " + std::to_string(rank1) + ") was killed by SIGKILL"),
            std::string::npos)
      << log;
  // Rank 0 left on its own (the broken connection), not by the launcher's SIGKILL.
  EXPECT_EQ(log.find("still running: SIGKILL"), std::string::npos) << log;
  EXPECT_NE(::kill(rank0, 0), 0) << "rank 0 outlived the launcher";
}

TEST(DistributedRunTest, AutomaticThreadsShareTheHostsCpusAmongItsRanks) {
  testing::TempDir dir;
  std::string yaml = Job(1, 2, 4);
  yaml.replace(yaml.find("runtime: {threads: 1}"), 21, "runtime: {threads: auto}");
  ChildProcess two(Launch(
      2, {"--config", dir.Write("two.yaml", yaml), "--output-dir", dir.File("out"), "--json"}));
  const auto events = Events(two.ReadAllLines());
  ASSERT_EQ(two.ExitCode(), 0) << two.ReadAllStderr();
  EXPECT_EQ(events.front()["threads"], std::max(1, UsableCpuCount() / 2));
}

TEST(DistributedRunTest, TheLaunchersWorldMustBeTheJobsRanks) {
  testing::TempDir dir;
  const std::string config = dir.Write("two.yaml", Job(3, 2, 4));
  int code = 0;
  std::string log = testing::RunToEnd(
      Launch(3, {"--config", config, "--output-dir", dir.File("out"), "--json"}), &code);
  EXPECT_EQ(code, 2) << log;
  EXPECT_NE(log.find("started 3 ranks but " + config + " has distributed.ranks: 2"),
            std::string::npos)
      << log;
  log = testing::RunToEnd({TRAINER_RUN_PATH, "--config", config, "--json"}, &code);
  EXPECT_EQ(code, 2) << log;
  EXPECT_NE(log.find("trainer-launch --ranks 2 -- trainer-run"), std::string::npos) << log;
}

TEST(DistributedRunTest, ThePlanIsPerRank) {
  testing::TempDir dir;
  testing::TinyGptYamlOptions options;
  options.extra = "distributed: {ranks: 2}\nplan: {microbatch: 8}\n";
  int code = 0;
  const std::string log = testing::RunToEnd(
      {TRAINER_RUN_PATH, "--config", dir.Write("job.yaml", testing::TinyGptYaml(options))}, &code);
  EXPECT_EQ(code, 2);
  EXPECT_NE(log.find("plan.microbatch: expected at most a rank's share of "
                     "training.effective_batch (4 of 8 over 2 ranks), got 8"),
            std::string::npos)
      << log;
}

TEST(TrainerLaunchTest, UsageErrorsExitTwo) {
  for (const std::vector<std::string>& argv : std::vector<std::vector<std::string>>{
           {TRAINER_LAUNCH_PATH, "--", "true"},
           {TRAINER_LAUNCH_PATH, "--ranks", "0", "--", "true"},
           {TRAINER_LAUNCH_PATH, "--ranks", "2"},
           {TRAINER_LAUNCH_PATH, "--ranks", "2", "--stop-timeout", "soon", "--", "true"}}) {
    int code = 0;
    const std::string log = testing::RunToEnd(argv, &code);
    EXPECT_EQ(code, 2) << log;
    EXPECT_NE(log.find("usage:"), std::string::npos) << log;
  }
}

TEST(TrainerLaunchTest, EachRankGetsTorchrunsEnvironmentAndACommandThatCannotRunFails) {
  int code = 0;
  std::string log = testing::RunToEnd(
      {TRAINER_LAUNCH_PATH, "--ranks", "2", "--master-port", "29999", "--", "/bin/sh", "-c",
       "echo rank=$RANK local=$LOCAL_RANK world=$WORLD_SIZE addr=$MASTER_ADDR "
       "port=$MASTER_PORT"},
      &code);
  EXPECT_EQ(code, 0) << log;
  EXPECT_NE(log.find("rank=0 local=0 world=2 addr=127.0.0.1 port=29999"), std::string::npos) << log;
  EXPECT_NE(log.find("rank=1 local=1 world=2 addr=127.0.0.1 port=29999"), std::string::npos) << log;
  log = testing::RunToEnd({TRAINER_LAUNCH_PATH, "--ranks", "2", "--", "/no/such/program"}, &code);
  EXPECT_EQ(code, 127) << log;
  EXPECT_NE(log.find("cannot run /no/such/program"), std::string::npos) << log;
}

}  // namespace
}  // namespace trainerd
