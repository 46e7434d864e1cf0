// Outcome files as the serving side writes them: JSON lines and CSV, and each kind of bad
// line refused with its file and line named.
#include "trainerd/daemon/outcome_lines.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace trainerd::daemon {
namespace {

TEST(OutcomeLinesTest, JsonLinesAndCsvGiveTheSameOutcomes) {
  const std::string sha = "0123456789abcdef0123";
  Result<std::vector<OutcomeLine>> json = ParseOutcomeFile(
      "{\"release\": 3, \"slice\": \"en\", \"metric\": \"ctr\", \"value\": 0.12, \"count\": 500, "
      "\"at\": \"2026-12-05T10:00:00Z\"}\n"
      "\n"
      "{\"release\": \"" +
          sha + "\", \"slice\": \"de, at\", \"metric\": \"ctr\", \"value\": 0.5}\n",
      "o.jsonl");
  ASSERT_TRUE(json.ok()) << json.status().message();
  Result<std::vector<OutcomeLine>> csv = ParseOutcomeFile(
      "metric,release,slice,value,count,at\n"
      "ctr,3,en,0.12,500,1796464800\n"
      "\n"
      "ctr," +
          sha + ",\"de, at\",0.5,,\n",
      "o.csv");
  ASSERT_TRUE(csv.ok()) << csv.status().message();
  std::vector<OutcomeLine> expected = {{1, "3", "en", "ctr", 0.12, 500, 1796464800.0},
                                       {3, sha, "de, at", "ctr", 0.5, 1, std::nullopt}};
  EXPECT_EQ(*json, expected);
  expected[0].line = 2;  // below the header
  expected[1].line = 4;
  EXPECT_EQ(*csv, expected);
  // The control request's form round-trips.
  for (const OutcomeLine& line : expected) {
    Result<OutcomeLine> back = OutcomeLineFromJson(ToJson(line), "request");
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(*back, line);
  }
}

TEST(OutcomeLinesTest, AModelHashIsLowerCasedAsStored) {
  Result<std::vector<OutcomeLine>> lines = ParseOutcomeFile(
      "{\"release\": \"D0F28859CA93\", \"slice\": \"en\", \"metric\": \"ctr\", \"value\": 1}\n",
      "o");
  ASSERT_TRUE(lines.ok()) << lines.status().message();
  EXPECT_EQ((*lines)[0].release, "d0f28859ca93");
}

TEST(OutcomeLinesTest, TimesAreUnixSecondsOrIso8601InUtc) {
  EXPECT_EQ(ParseOutcomeTime("1796464800"), 1796464800.0);
  EXPECT_EQ(ParseOutcomeTime("1796464800.25"), 1796464800.25);
  EXPECT_EQ(ParseOutcomeTime("2026-12-05T10:00:00Z"), 1796464800.0);
  EXPECT_EQ(ParseOutcomeTime("2026-12-05T10:00:00.5+00:00"), 1796464800.5);
  // More digits than a double holds (std::stod threw out_of_range: trainerctl aborted).
  const std::string zeros(400, '0');
  EXPECT_EQ(ParseOutcomeTime("2026-12-05T10:00:00." + zeros + "1Z"), 1796464800.0);
  EXPECT_EQ(ParseOutcomeTime("2026-12-05T10:00:00.25" + zeros + "1Z"), 1796464800.25);
  for (const char* bad : {"", "yesterday", "2026-12-05", "2026-12-05T10:00:00",
                          "2026-12-05T10:00:00+01:00", "2026-12-05T10:00:00.Z", "nan", "inf"}) {
    EXPECT_EQ(ParseOutcomeTime(bad), std::nullopt) << bad;
  }
}

TEST(OutcomeLinesTest, EachBadLineIsRefusedNamingItsFileLineAndField) {
  const std::string csv_header = "release,slice,metric,value,count,at\n";
  const struct {
    std::string text;
    std::string error;
  } cases[] = {
      {"", "o: no outcomes"},
      {csv_header + "3,en,ctr,nan,1,\n",
       "o:2: value: expected a number within +-10^15, got \"nan\""},
      // Finite, but its sums with counts up to 10^12 would not stay so.
      {csv_header + "3,en,ctr,1e300,1,\n",
       "o:2: value: expected a number within +-10^15, got 1e+300"},
      {csv_header + "3,en,ctr,0.1,-4,\n",
       "o:2: count: expected a whole number of outcomes, at least 1 and at most 10^12, got "
       "\"-4\""},
      {csv_header + "3,en,ctr,0.1,2.5,\n",
       "o:2: count: expected a whole number of outcomes, at least 1 and at most 10^12, got "
       "\"2.5\""},
      {csv_header + "3,en,ctr,0.1,1,soon\n", "o:2: at: expected Unix seconds or an ISO 8601"},
      {csv_header + "3,en,ctr\n", "o:2: 3 fields, the header names 6"},
      {csv_header + "3,\"en,ctr,0.1,1,\n", "o:2: a quoted field is not closed"},
      {csv_header + "latest,en,ctr,0.1,1,\n",
       "o:2: release: expected a release id or 12+ hex digits of its model's sha256"},
      {csv_header + "3,,ctr,0.1,1,\n", "o:2: slice: expected a name in UTF-8, got \"\""},
      {"release,slice,metric\n3,en,ctr\n", "o:1: the CSV header has no column 'value'"},
      {"release,slice,metric,value,clicks\n", "o:1: the CSV header's column 'clicks'"},
      {"{\"release\": 3, \"slice\": \"en\", \"metric\": \"ctr\", \"value\": 1}\n{\"release\": 3,\n",
       "o:2: not a JSON object"},
      {"{\"release\": 3, \"slice\": \"en\", \"metric\": \"ctr\"}\n", "o:1: no value"},
      {"{\"release\": 3, \"slice\": \"en\", \"metric\": \"ctr\", \"value\": \"high\"}\n",
       "o:1: value: expected a number within +-10^15"},
      {"{\"release\": 3, \"slice\": \"en\", \"metric\": \"ctr\", \"value\": 1, \"user\": 7}\n",
       "o:1: unknown field 'user'"},
      {"{\"release\": -3, \"slice\": \"en\", \"metric\": \"ctr\", \"value\": 1}\n",
       "o:1: release: expected a release id"},
      {csv_header + "3,en,ctr,0.1,1000000000001,\n",
       "o:2: count: expected a whole number of outcomes, at least 1 and at most 10^12"},
      {csv_header + "3,en,ctr,0.1,1,1e300\n", "o:2: at: expected Unix seconds or an ISO 8601"},
      {csv_header + "3,en,ctr,0.1,1,-5\n", "o:2: at: expected Unix seconds or an ISO 8601"},
      {csv_header + "3,Z\xfcrich,ctr,0.1,1,\n", "o:2: slice: expected a name in UTF-8, got"},
      {"release,\"slice,metric,value\n3,en,ctr,0.1\n", "o:1: a quoted field is not closed"},
  };
  for (const auto& c : cases) {
    Result<std::vector<OutcomeLine>> parsed = ParseOutcomeFile(c.text, "o");
    ASSERT_FALSE(parsed.ok()) << c.text;
    EXPECT_EQ(parsed.status().code(), Status::Code::kInvalidArgument);
    EXPECT_EQ(parsed.status().message().rfind(c.error, 0), 0u)
        << "text:\n"
        << c.text << "error:    " << parsed.status().message() << "\nexpected: " << c.error;
  }
}

}  // namespace
}  // namespace trainerd::daemon
