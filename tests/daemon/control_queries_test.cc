// The control protocol's parsing and read-only answers without a socket: ParseControlRequest
// as ControlServer uses it, and AnswerFromStore's argument checks on a real SQLite store.
#include "trainerd/daemon/control_queries.h"

#include <gtest/gtest.h>

#include <string>

#include "../support/temp_dir.h"

namespace trainerd::daemon {
namespace {

using Json = nlohmann::json;

TEST(ParseControlRequestTest, AcceptsOneObjectWithAStringCommand) {
  Result<Json> request = ParseControlRequest(R"( {"command": "show", "run": 7} )");
  ASSERT_TRUE(request.ok()) << request.status().message();
  EXPECT_EQ((*request)["run"], 7);
}

TEST(ParseControlRequestTest, AnythingElseIsABadRequestWithTheServersMessage) {
  const std::string expected = "expected one JSON object per line with a \"command\"";
  for (const char* line : {"", "status", "[1]", R"({"run": 7})", R"({"command": 5})",
                           R"({"command": "status"} {"command": "runs"})"}) {
    Result<Json> request = ParseControlRequest(line);
    ASSERT_FALSE(request.ok()) << line;
    EXPECT_EQ(request.status().message(), expected) << line;
  }
  const std::string oversized =
      R"({"command": "status", "pad": ")" + std::string(kMaxRequestBytes, 'x') + "\"}";
  EXPECT_EQ(ParseControlRequest(oversized).status().message(),
            "request longer than 16777216 bytes");
}

// ~100 KB of brackets under the 16 MiB cap: parsed, the request's copy and dump() recursed
// once per level and overflowed the daemon's stack, from any peer, on any command.
TEST(ParseControlRequestTest, NestingDeeperThanTheBoundIsABadRequest) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const Result<Json> request = ParseControlRequest(R"({"command": "status", "pad": )" + deep + "}");
  ASSERT_FALSE(request.ok());
  EXPECT_EQ(request.status().message(), "expected one JSON object per line with a \"command\"");
  const std::string shallow = std::string(10, '[') + std::string(10, ']');
  EXPECT_TRUE(ParseControlRequest(R"({"command": "status", "pad": )" + shallow + "}").ok());
}

class AnswerFromStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<std::unique_ptr<store::Store>> opened = store::Store::Open(dir_.File("trainerd.db"));
    ASSERT_TRUE(opened.ok()) << opened.status().message();
    store_ = std::move(*opened);
  }
  Json Answer(const Json& request) {
    return AnswerFromStore(*store_, dir_.File("job.yaml"), request);
  }

  testing::TempDir dir_;
  std::unique_ptr<store::Store> store_;
};

// Found with tests/fuzz/control_request_fuzzer's check of the documented range: get<int>()
// wrapped 4294967297 to 1 before the range check, so such a limit was accepted.
TEST_F(AnswerFromStoreTest, ARunsLimitOutsideTheRangeIsRefusedBeforeItIsNarrowed) {
  for (const char* limit :
       {"4294967297", "18446744073709551615", "-4294967295", "0", "10001", "1.5", "\"5\""}) {
    const Json answer =
        Answer(Json::parse(std::string(R"({"command":"runs","limit":)") + limit + "}"));
    EXPECT_EQ(answer["ok"], false) << limit;
    EXPECT_EQ(answer["error"]["code"], kBadRequest) << limit;
  }
  EXPECT_EQ(Answer({{"command", "runs"}, {"limit", 10000}})["ok"], true);
  EXPECT_EQ(Answer({{"command", "runs"}})["result"]["runs"], Json::array());
}

}  // namespace
}  // namespace trainerd::daemon
