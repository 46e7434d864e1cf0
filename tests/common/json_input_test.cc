#include "trainerd/common/json_input.h"

#include <gtest/gtest.h>

#include <string>

namespace trainerd {
namespace {

std::string Nested(int levels, char open, char close) {
  return std::string(levels, open) + std::string(levels, close);
}

TEST(JsonInputTest, ParsesWhatIsNestedUpToTheBound) {
  const nlohmann::json json = ParseBoundedJson(R"({"a": [1, {"b": null}], "c": "d"})");
  ASSERT_FALSE(json.is_discarded());
  EXPECT_EQ(json["a"][1], nlohmann::json({{"b", nullptr}}));
  EXPECT_FALSE(ParseBoundedJson(Nested(kMaxJsonDepth, '[', ']')).is_discarded());
  EXPECT_EQ(ParseBoundedJson("42"), 42);
}

TEST(JsonInputTest, RefusesDeeperNesting) {
  EXPECT_TRUE(ParseBoundedJson(Nested(kMaxJsonDepth + 1, '[', ']')).is_discarded());
  EXPECT_TRUE(ParseBoundedJson(R"({"a":{"b":{"c":1}}})", 2).is_discarded());
  EXPECT_FALSE(ParseBoundedJson(R"({"a":{"b":{"c":1}}})", 3).is_discarded());
  // The control socket's whole 16 MiB of brackets: refused, and nothing recurses per level.
  EXPECT_TRUE(ParseBoundedJson(Nested(8 << 20, '[', ']')).is_discarded());
  std::string objects;
  for (int i = 0; i < 100000; ++i) objects += "{\"a\":";
  objects += "1" + std::string(100000, '}');
  EXPECT_TRUE(ParseBoundedJson(objects).is_discarded());
}

TEST(JsonInputTest, RefusesWhatIsNotJson) {
  EXPECT_TRUE(ParseBoundedJson("{\"a\": ").is_discarded());
  EXPECT_TRUE(ParseBoundedJson("").is_discarded());
  EXPECT_TRUE(ParseBoundedJson("[1] x").is_discarded());
}

}  // namespace
}  // namespace trainerd
