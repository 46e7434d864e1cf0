#include "trainerd/common/sha256.h"

#include <gtest/gtest.h>

#include <string>

#include "../support/temp_dir.h"

namespace trainerd {
namespace {

TEST(Sha256Test, MatchesFipsTestVectors) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(Sha256Hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256Test, IncrementalEqualsOneShot) {
  const std::string text(200, 'x');
  Sha256 hasher;
  for (char c : text) hasher.Update(&c, 1);
  EXPECT_EQ(hasher.HexDigest(), Sha256Hex(text));
}

TEST(Sha256Test, FileHashAndMissingFile) {
  testing::TempDir dir;
  const std::string path = dir.Write("f", "abc");
  Result<std::string> hash = Sha256File(path);
  ASSERT_TRUE(hash.ok()) << hash.status().message();
  EXPECT_EQ(*hash, Sha256Hex("abc"));
  Result<std::string> missing = Sha256File(dir.File("nope"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("nope"), std::string::npos);
}

}  // namespace
}  // namespace trainerd
