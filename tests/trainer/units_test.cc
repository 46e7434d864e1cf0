#include "trainerd/trainer/spec/units.h"

#include <gtest/gtest.h>

#include <limits>

namespace trainerd {
namespace {

TEST(ParseBytesTest, AcceptsBinaryDecimalAndPlainSizes) {
  EXPECT_EQ(*ParseBytes("24GiB"), 24LL * 1024 * 1024 * 1024);
  EXPECT_EQ(*ParseBytes("512MiB"), 512LL * 1024 * 1024);
  EXPECT_EQ(*ParseBytes("0.34GB"), 340'000'000LL);
  EXPECT_EQ(*ParseBytes("3.2GB"), 3'200'000'000LL);
  EXPECT_EQ(*ParseBytes("1024"), 1024);
  EXPECT_EQ(*ParseBytes("7B"), 7);
  EXPECT_EQ(*ParseBytes("1e9"), 1'000'000'000LL);
}

TEST(ParseBytesTest, RejectsUnknownUnitsAndGarbage) {
  for (const char* bad : {"", "GiB", "12 parsecs", "1.2.3GB", "-5GB", "12gib"}) {
    Result<std::int64_t> r = ParseBytes(bad);
    EXPECT_FALSE(r.ok()) << bad;
  }
  EXPECT_NE(ParseBytes("12XB").status().message().find("XB"), std::string::npos);
}

TEST(ParseDurationTest, AcceptsHoursMinutesSecondsAndCombinations) {
  EXPECT_DOUBLE_EQ(*ParseDurationSeconds("6h"), 6 * 3600.0);
  EXPECT_DOUBLE_EQ(*ParseDurationSeconds("90m"), 5400.0);
  EXPECT_DOUBLE_EQ(*ParseDurationSeconds("45s"), 45.0);
  EXPECT_DOUBLE_EQ(*ParseDurationSeconds("1h30m"), 5400.0);
  EXPECT_DOUBLE_EQ(*ParseDurationSeconds("3600"), 3600.0);
  EXPECT_DOUBLE_EQ(*ParseDurationSeconds("0.5h"), 1800.0);
}

TEST(ParseDurationTest, RejectsGarbage) {
  for (const char* bad : {"", "h", "6d", "1h30", "soon"}) {
    EXPECT_FALSE(ParseDurationSeconds(bad).ok()) << bad;
  }
}

TEST(FormatTest, HumanReadableSizesAndDurations) {
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(1536LL * 1024 * 1024), "1.50 GiB");
  EXPECT_EQ(FormatDuration(12.44), "12.4s");
  EXPECT_EQ(FormatDuration(187), "3m 07s");
  EXPECT_EQ(FormatDuration(3720), "1h 02m");
}

// Found with tests/fuzz/worker_report_fuzzer: a worker's ETA of 1e300 s reaches FormatDuration
// (trainerctl status), whose cast to long was undefined behaviour.
TEST(FormatTest, ADurationNoLongHoldsIsFormattedWithoutACast) {
  EXPECT_EQ(FormatDuration(1e300), "2.78e+296h");
  EXPECT_EQ(FormatDuration(std::numeric_limits<double>::quiet_NaN()), "?");
}

}  // namespace
}  // namespace trainerd
