#include "trainerd/daemon/instance_lock.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include "../support/temp_dir.h"

namespace trainerd::daemon {
namespace {

TEST(InstanceLockTest, ASecondHolderIsRefusedNamingTheFirstsPid) {
  testing::TempDir dir;
  const std::string path = dir.File("trainerd.lock");
  Result<InstanceLock> first = InstanceLock::Acquire(path);
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_EQ(testing::ReadFile(path), std::to_string(::getpid()));
  Result<InstanceLock> second = InstanceLock::Acquire(path);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(second.status().message().find("pid " + std::to_string(::getpid())), std::string::npos)
      << second.status().message();
}

TEST(InstanceLockTest, TheLockGoesWithItsHolder) {
  testing::TempDir dir;
  const std::string path = dir.File("trainerd.lock");
  { ASSERT_TRUE(InstanceLock::Acquire(path).ok()); }
  EXPECT_TRUE(InstanceLock::Acquire(path).ok());
  // A holder killed outright: the kernel drops its lock, the file stays behind.
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    Result<InstanceLock> held = InstanceLock::Acquire(path);
    [[maybe_unused]] ssize_t n = ::write(ready[1], held.ok() ? "y" : "n", 1);
    ::pause();
    ::_exit(0);
  }
  char answer = 0;
  ASSERT_EQ(::read(ready[0], &answer, 1), 1);
  ASSERT_EQ(answer, 'y');
  EXPECT_FALSE(InstanceLock::Acquire(path).ok());
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  EXPECT_TRUE(InstanceLock::Acquire(path).ok());
}

}  // namespace
}  // namespace trainerd::daemon
