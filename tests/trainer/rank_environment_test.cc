#include "trainerd/trainer/spec/rank_environment.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace trainerd {
namespace {

Result<RankEnvironment> From(const std::map<std::string, std::string>& variables) {
  return RankEnvironmentFrom([&](const char* name) -> const char* {
    const auto it = variables.find(name);
    return it == variables.end() ? nullptr : it->second.c_str();
  });
}

TEST(RankEnvironmentTest, NoLauncherIsOneProcess) {
  Result<RankEnvironment> env = From({});
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(env->world_size, 1);
  EXPECT_EQ(env->rank, 0);
  EXPECT_EQ(env->launcher, "");
}

TEST(RankEnvironmentTest, TorchrunsVariables) {
  Result<RankEnvironment> env = From({{"RANK", "3"},
                                      {"WORLD_SIZE", "4"},
                                      {"LOCAL_RANK", "1"},
                                      {"LOCAL_WORLD_SIZE", "2"},
                                      {"MASTER_ADDR", "node7"},
                                      {"MASTER_PORT", "29400"},
                                      {"SLURM_PROCID", "0"}});  // torchrun's win
  ASSERT_TRUE(env.ok()) << env.status().message();
  EXPECT_EQ(env->launcher, "torchrun");
  EXPECT_EQ(env->rank, 3);
  EXPECT_EQ(env->world_size, 4);
  EXPECT_EQ(env->local_rank, 1);
  EXPECT_EQ(env->local_world_size, 2);
  EXPECT_EQ(env->master_addr, "node7");
  EXPECT_EQ(env->master_port, 29400);
  EXPECT_FALSE(env->launcher_serves_store);
}

TEST(RankEnvironmentTest, TorchrunsAgentStoreIsJoinedUnderAPrefixPerRestart) {
  Result<RankEnvironment> env = From({{"RANK", "0"},
                                      {"WORLD_SIZE", "2"},
                                      {"MASTER_ADDR", "localhost"},
                                      {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                                      {"TORCHELASTIC_RESTART_COUNT", "2"}});
  ASSERT_TRUE(env.ok()) << env.status().message();
  EXPECT_TRUE(env->launcher_serves_store);
  EXPECT_EQ(env->store_prefix, "trainerd/attempt_2");
}

TEST(RankEnvironmentTest, SlurmsVariablesWithTheFirstNodeAsMaster) {
  Result<RankEnvironment> env = From({{"SLURM_PROCID", "5"},
                                      {"SLURM_NTASKS", "8"},
                                      {"SLURM_LOCALID", "1"},
                                      {"SLURM_JOB_NODELIST", "gpu[003-006,9],cpu1"}});
  ASSERT_TRUE(env.ok()) << env.status().message();
  EXPECT_EQ(env->launcher, "slurm");
  EXPECT_EQ(env->rank, 5);
  EXPECT_EQ(env->world_size, 8);
  EXPECT_EQ(env->local_rank, 1);
  EXPECT_EQ(env->master_addr, "gpu003");
  EXPECT_EQ(env->master_port, 29500);
}

TEST(RankEnvironmentTest, BadValuesAreNamed) {
  const std::vector<std::pair<std::map<std::string, std::string>, std::string>> cases = {
      {{{"RANK", "x"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}}, "RANK='x' is not an integer"},
      {{{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}},
       "RANK=2 is not below WORLD_SIZE=2"},
      {{{"RANK", "0"}, {"MASTER_ADDR", "a"}}, "RANK is set but WORLD_SIZE is not"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}}, "RANK is set but MASTER_ADDR is not"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "70000"}},
       "MASTER_PORT='70000' is not an integer in [1, 65535]"},
      {{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}},
       "neither SLURM_JOB_NODELIST nor SLURM_NODELIST"},
      {{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_NODELIST", "n[x-2]"}},
       "SLURM node list 'n[x-2]' is malformed"},
  };
  for (const auto& [variables, message] : cases) {
    Result<RankEnvironment> env = From(variables);
    ASSERT_FALSE(env.ok()) << message;
    EXPECT_NE(env.status().message().find(message), std::string::npos) << env.status().message();
  }
}

TEST(RankEnvironmentTest, FirstHostOfNodeLists) {
  EXPECT_EQ(*FirstHostOfNodeList("node1"), "node1");
  EXPECT_EQ(*FirstHostOfNodeList("a,b[1-2]"), "a");
  EXPECT_EQ(*FirstHostOfNodeList("node[07-09,12]"), "node07");
  EXPECT_EQ(*FirstHostOfNodeList("n[3]"), "n3");
  for (const char* bad : {"", "[1-2]", "n[1-2", ",a", "n]"}) {
    EXPECT_FALSE(FirstHostOfNodeList(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace trainerd
