#include "trainerd/common/atomic_file.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "../support/temp_dir.h"

namespace trainerd {
namespace {

using testing::ReadFile;

// Names of the files in `dir`.
std::vector<std::string> Files(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

TEST(AtomicFileTest, ReplacesContentsAndLeavesNoTemporary) {
  testing::TempDir dir;
  const std::string path = dir.Write("model.pt", "old");
  ASSERT_TRUE(WriteFileAtomically(path, "new contents").ok());
  EXPECT_EQ(ReadFile(path), "new contents");
  EXPECT_EQ(Files(dir.path().string()), (std::vector<std::string>{"model.pt"}));
}

TEST(AtomicFileTest, TwoWritersOfOneTargetGetTheirOwnTemporaries) {
  testing::TempDir dir;
  const TemporaryFile a(dir.File("model.pt"));
  const TemporaryFile b(dir.File("model.pt"));
  EXPECT_NE(a.path(), b.path());
  EXPECT_EQ(a.path().rfind(dir.File("model.pt.tmp."), 0), 0u) << a.path();
  // The temporary has the target's own name: formats that record it write the same bytes.
  EXPECT_EQ(std::filesystem::path(a.path()).filename(), "model.pt");
}

TEST(AtomicFileTest, AFailedOrAbandonedWriteLeavesNoTemporaryAndTheOldFileIntact) {
  testing::TempDir dir;
  const std::string target = dir.Write("model.pt", "old");
  {
    TemporaryFile abandoned(target);
    std::ofstream(abandoned.path()) << "half written";
  }
  std::filesystem::create_directory(dir.File("busy"));
  dir.Write("busy/inside", "x");  // renaming a file over a non-empty directory fails
  {
    TemporaryFile failing(dir.File("busy"));
    std::ofstream(failing.path()) << "new";
    EXPECT_FALSE(failing.Commit().ok());
  }
  EXPECT_EQ(Files(dir.path().string()), (std::vector<std::string>{"busy", "model.pt"}));
  EXPECT_EQ(ReadFile(target), "old");
}

TEST(AtomicFileTest, MissingDirectoryIsAnErrorNamingThePath) {
  testing::TempDir dir;
  const std::string path = dir.File("no-such-dir/model.pt");
  Status s = WriteFileAtomically(path, "x");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Status::Code::kIOError);
  EXPECT_NE(s.message().find("no-such-dir"), std::string::npos);
}

}  // namespace
}  // namespace trainerd
