#include "trainerd/common/bounded_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "../support/temp_dir.h"

namespace trainerd {
namespace {

TEST(BoundedFileTest, ReadsARegularFileWithinItsBound) {
  testing::TempDir dir;
  const std::string path = dir.Write("config.json", "{\"a\": 1}");
  Result<std::string> text = ReadBoundedFile(path, 8);
  ASSERT_TRUE(text.ok()) << text.status().message();
  EXPECT_EQ(*text, "{\"a\": 1}");
  std::filesystem::create_symlink(path, dir.File("link.json"));
  EXPECT_TRUE(ReadBoundedFile(dir.File("link.json"), 8).ok());
}

TEST(BoundedFileTest, RefusesALargerFileNamingIt) {
  testing::TempDir dir;
  const std::string path = dir.Write("index.json", std::string(9, 'x'));
  Result<std::string> text = ReadBoundedFile(path, 8);
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(text.status().message().find(path), std::string::npos);
  EXPECT_NE(text.status().message().find("9 bytes"), std::string::npos);
}

TEST(BoundedFileTest, RefusesAFifoWithoutWaitingForAWriter) {
  testing::TempDir dir;
  const std::string path = dir.File("shard.safetensors");
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  Result<std::string> text = ReadBoundedFile(path, 1 << 20);  // blocked forever if it waited
  ASSERT_FALSE(text.ok());
  EXPECT_NE(text.status().message().find("not a regular file"), std::string::npos);
}

TEST(BoundedFileTest, RefusesAFolderAndSaysWhenNothingIsThere) {
  testing::TempDir dir;
  EXPECT_EQ(ReadBoundedFile(dir.path().string(), 100).status().code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(ReadBoundedFile(dir.File("missing"), 100).status().code(), Status::Code::kNotFound);
}

}  // namespace
}  // namespace trainerd
