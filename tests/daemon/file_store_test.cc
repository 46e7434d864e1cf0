#include "trainerd/daemon/file_store.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "../support/temp_dir.h"
#include "trainerd/common/sha256.h"

namespace trainerd::daemon {
namespace {

using testing::ReadFile;

std::size_t FileCount(const std::filesystem::path& dir) {
  return static_cast<std::size_t>(std::distance(std::filesystem::directory_iterator(dir), {}));
}

// Larger than one chunk (1 MiB) and not a multiple of it: the copy streams.
std::string Model() {
  std::string bytes(3 * (1 << 20) + 12345, '\0');
  for (std::size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = static_cast<char>(i * 2654435761u >> 24);
  return bytes;
}

TEST(FileStoreTest, AVerifiedCopyIsByteIdenticalAndReturnsItsHash) {
  testing::TempDir dir;
  const std::string model = Model();
  const std::string source = dir.Write("model.pt", model);
  LocalFileStore files;
  Result<std::string> sha = files.CopyVerified(source, dir.File("release.pt"), Sha256Hex(model));
  ASSERT_TRUE(sha.ok()) << sha.status().message();
  EXPECT_EQ(*sha, Sha256Hex(model));
  EXPECT_EQ(ReadFile(dir.File("release.pt")), model);
  EXPECT_EQ(FileCount(dir.path()), 2u);  // no temporary left
}

TEST(FileStoreTest, AHashMismatchWritesNothingAndKeepsTheOldRelease) {
  testing::TempDir dir;
  const std::string source = dir.Write("model.pt", Model());
  const std::string release = dir.Write("release.pt", "the old release");
  LocalFileStore files;
  Result<std::string> sha = files.CopyVerified(source, release, Sha256Hex("something else"));
  ASSERT_FALSE(sha.ok());
  EXPECT_EQ(sha.status().code(), Status::Code::kCorruption);
  EXPECT_NE(sha.status().message().find("model.pt"), std::string::npos);
  EXPECT_EQ(ReadFile(release), "the old release");
  EXPECT_EQ(FileCount(dir.path()), 2u);
  EXPECT_EQ(files.CopyVerified(dir.File("missing.pt"), release, "").status().code(),
            Status::Code::kNotFound);
}

}  // namespace
}  // namespace trainerd::daemon
