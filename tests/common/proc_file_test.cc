#include "trainerd/common/proc_file.h"

#include <gtest/gtest.h>

namespace trainerd {
namespace {

TEST(ProcFileTest, TheMemoryControllersCgroupV1FolderComesFromItsLine) {
  EXPECT_EQ(MemoryCgroupV1Dir("5:cpuset:/\n4:memory:/process_api/abc\n0::/\n"),
            "/sys/fs/cgroup/memory/process_api/abc");
  EXPECT_EQ(MemoryCgroupV1Dir("3:cpu,memory,pids:/system.slice/trainerd.service\n"),
            "/sys/fs/cgroup/memory/system.slice/trainerd.service");
  // cgroup v2 only, a controller whose name contains "memory", nothing: no v1 folder.
  EXPECT_EQ(MemoryCgroupV1Dir("0::/user.slice\n"), "");
  EXPECT_EQ(MemoryCgroupV1Dir("7:memory_fake:/x\n"), "");
  EXPECT_EQ(MemoryCgroupV1Dir(""), "");
}

}  // namespace
}  // namespace trainerd
