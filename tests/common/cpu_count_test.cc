#include "trainerd/common/cpu_count.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

namespace trainerd {
namespace {

TEST(CpuCountTest, ACgroupQuotaIsRoundedUpToWholeCpus) {
  EXPECT_EQ(CpusOfCgroupMax("150000 100000"), 2);
  EXPECT_EQ(CpusOfCgroupMax("200000 100000"), 2);
  EXPECT_EQ(CpusOfCgroupMax("50000 100000"), 1);
  EXPECT_EQ(CpusOfCgroupMax("max 100000"), std::nullopt);
  EXPECT_EQ(CpusOfCgroupMax(""), std::nullopt);
  EXPECT_EQ(CpusOfCgroupMax("lots 100000"), std::nullopt);
}

// taskset -c 0: a process pinned to one CPU counts one, whatever the machine has.
TEST(CpuCountTest, TheAffinityMaskLimitsTheCount) {
  EXPECT_GE(UsableCpuCount(), 1);
  const pid_t child = ::fork();
  if (child == 0) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(0, &one);
    if (sched_setaffinity(0, sizeof one, &one) != 0) ::_exit(2);
    ::_exit(UsableCpuCount() == 1 ? 0 : 1);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace trainerd
