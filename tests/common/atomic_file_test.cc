#include "trainerd/common/atomic_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "../support/temp_dir.h"

namespace trainerd {
namespace {

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

TEST(AtomicFileTest, ReplacesContentsAndLeavesNoTemporary) {
  testing::TempDir dir;
  const std::string path = dir.Write("model.pt", "old");
  ASSERT_TRUE(WriteFileAtomically(path, "new contents").ok());
  EXPECT_EQ(Read(path), "new contents");
  EXPECT_FALSE(std::filesystem::exists(TemporaryPathFor(path)));
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
