#include "trainerd/daemon/schedule.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace trainerd::daemon {
namespace {

// Expected instants are literals, computed with `date -u -d <UTC date> +%s`, never with the
// code under test.
constexpr double k20261129T0130Z = 1795915800;
constexpr double k20261130T0100Z = 1796000400;
constexpr double k20261130T0130Z = 1796002200;
constexpr double k20261130T0300Z = 1796007600;
constexpr double k20261130T0730Z = 1796023800;
constexpr double k20261201T0130Z = 1796088600;
constexpr double k20261130T2300Z = 1796079600;
constexpr double k20261201T0200Z = 1796090400;
constexpr double k20261201T0500Z = 1796101200;
constexpr double k20261231T2300Z = 1798758000;
constexpr double k20270101T0200Z = 1798768800;
constexpr double kHour = 3600;

// Europe/Berlin: CET (UTC+1) until 2026-03-29T01:00Z, then CEST (UTC+2) until
// 2026-10-25T01:00Z, then CET again.
constexpr double k20260328T0030Z = 1774657800;  // 01:30 CET on 03-28
constexpr double k20260328T1200Z = 1774699200;
constexpr double k20260329T0030Z = 1774744200;  // 01:30 CET on 03-29, before the change
constexpr double k20260329T0130Z = 1774747800;  // 03:30 CEST on 03-29 (02:30 does not exist)
constexpr double k20260329T2330Z = 1774827000;  // 01:30 CEST on 03-30
constexpr double k20260330T0030Z = 1774830600;  // 02:30 CEST on 03-30
constexpr double k20261024T1200Z = 1792843200;
constexpr double k20261024T2330Z = 1792884600;  // 01:30 CEST on 10-25
constexpr double k20261025T0030Z = 1792888200;  // 02:30 CEST on 10-25, the first 02:30
constexpr double k20261025T0130Z = 1792891800;  // 02:30 CET on 10-25, the second 02:30
constexpr double k20261025T0145Z = 1792892700;  // 02:45 CET on 10-25
constexpr double k20261026T0030Z = 1792974600;  // 01:30 CET on 10-26
constexpr double k20261026T0130Z = 1792978200;  // 02:30 CET on 10-26
constexpr double k20260615T1200Z = 1781524800;
constexpr double k20260615T2200Z = 1781560800;  // 00:00 CEST on 06-16
constexpr double k20260616T0000Z = 1781568000;

ScheduleConfig Schedule(int start_minute, double window_seconds,
                        const std::string& timezone = "UTC") {
  ScheduleConfig schedule;
  schedule.start_minute = start_minute;
  schedule.window_seconds = window_seconds;
  schedule.timezone = timezone;
  return schedule;
}

// Restores the process's TZ after each test, whatever the test set it to.
class ScheduleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const char* tz = std::getenv("TZ")) saved_tz_ = tz;
  }
  void TearDown() override {
    if (saved_tz_) {
      ::setenv("TZ", saved_tz_->c_str(), 1);
    } else {
      ::unsetenv("TZ");
    }
    ::tzset();
  }
  static bool HaveBerlin() { return std::filesystem::exists("/usr/share/zoneinfo/Europe/Berlin"); }

 private:
  std::optional<std::string> saved_tz_;
};

TEST_F(ScheduleTest, BeforeTodaysStartTheClosedPreviousWindowIsNotReturned) {
  const ScheduleConfig schedule = Schedule(90, 6 * kHour);
  EXPECT_EQ(WindowContaining(k20261130T0100Z, schedule), std::nullopt);
  EXPECT_EQ(NextWindow(k20261130T0100Z, schedule),
            (Window{k20261130T0130Z, k20261130T0130Z + 6 * kHour}));
}

TEST_F(ScheduleTest, BeforeTodaysStartThePreviousWindowIfStillOpen) {
  const ScheduleConfig schedule = Schedule(90, 24 * kHour);
  EXPECT_EQ(WindowContaining(k20261130T0100Z, schedule),
            (Window{k20261129T0130Z, k20261130T0130Z}));
}

TEST_F(ScheduleTest, InsideTheWindow) {
  const ScheduleConfig schedule = Schedule(90, 6 * kHour);
  EXPECT_EQ(WindowContaining(k20261130T0300Z, schedule),
            (Window{k20261130T0130Z, k20261130T0730Z}));
  EXPECT_EQ(NextWindow(k20261130T0300Z, schedule),
            (Window{k20261201T0130Z, k20261201T0130Z + 6 * kHour}));
}

TEST_F(ScheduleTest, ExactlyAtTheStartIsInsideAndTheNextWindowIsTomorrow) {
  const ScheduleConfig schedule = Schedule(90, 6 * kHour);
  EXPECT_EQ(WindowContaining(k20261130T0130Z, schedule),
            (Window{k20261130T0130Z, k20261130T0730Z}));
  EXPECT_EQ(NextWindow(k20261130T0130Z, schedule).start, k20261201T0130Z);
}

TEST_F(ScheduleTest, ExactlyAtTheDeadlineIsOutside) {
  const ScheduleConfig schedule = Schedule(90, 6 * kHour);
  EXPECT_EQ(WindowContaining(k20261130T0730Z, schedule), std::nullopt);
  EXPECT_EQ(NextWindow(k20261130T0730Z, schedule).start, k20261201T0130Z);
}

TEST_F(ScheduleTest, FractionalSecondsAroundTheEdges) {
  const ScheduleConfig schedule = Schedule(90, 6 * kHour);
  EXPECT_EQ(WindowContaining(k20261130T0130Z - 0.5, schedule), std::nullopt);
  EXPECT_EQ(NextWindow(k20261130T0130Z - 0.5, schedule).start, k20261130T0130Z);
  EXPECT_EQ(WindowContaining(k20261130T0130Z + 0.5, schedule),
            (Window{k20261130T0130Z, k20261130T0730Z}));
  EXPECT_EQ(NextWindow(k20261130T0130Z + 0.5, schedule).start, k20261201T0130Z);
  EXPECT_EQ(WindowContaining(k20261130T0730Z - 0.001, schedule),
            (Window{k20261130T0130Z, k20261130T0730Z}));
  EXPECT_EQ(WindowContaining(k20261130T0730Z + 0.25, schedule), std::nullopt);
}

TEST_F(ScheduleTest, WindowCrossingMidnight) {
  const ScheduleConfig schedule = Schedule(23 * 60, 6 * kHour);
  EXPECT_EQ(WindowContaining(k20261201T0200Z, schedule),
            (Window{k20261130T2300Z, k20261201T0500Z}));
  EXPECT_EQ(WindowContaining(k20270101T0200Z, schedule),
            (Window{k20261231T2300Z, k20261231T2300Z + 6 * kHour}));
  EXPECT_EQ(NextWindow(k20261201T0200Z, schedule).start, k20261130T2300Z + 24 * kHour);
}

TEST_F(ScheduleTest, WindowStartingAtIsNowPlusTheWindow) {
  const ScheduleConfig schedule = Schedule(90, 6 * kHour);
  EXPECT_EQ(WindowStartingAt(k20261130T0300Z + 0.5, schedule),
            (Window{k20261130T0300Z + 0.5, k20261130T0300Z + 0.5 + 6 * kHour}));
}

TEST_F(ScheduleTest, FormatUtc) {
  EXPECT_EQ(FormatUtc(k20261130T0130Z), "2026-11-30T01:30:00Z");
  EXPECT_EQ(FormatUtc(k20261231T2300Z + 0.999), "2026-12-31T23:00:00Z");
  EXPECT_EQ(FormatUtc(0), "1970-01-01T00:00:00Z");
}

TEST_F(ScheduleTest, UtcIgnoresTheProcessTimezone) {
  ::setenv("TZ", "XYZ-5", 1);  // POSIX zone 5 hours east of UTC
  ::tzset();
  const ScheduleConfig schedule = Schedule(0, 6 * kHour);
  EXPECT_EQ(NextWindow(k20260615T1200Z, schedule).start, k20260616T0000Z);
}

TEST_F(ScheduleTest, LocalUsesTheProcessTimezone) {
  if (!HaveBerlin()) GTEST_SKIP() << "tzdata is not installed";
  ::setenv("TZ", ":Europe/Berlin", 1);
  ::tzset();
  const ScheduleConfig schedule = Schedule(0, 6 * kHour, "local");
  EXPECT_EQ(NextWindow(k20260615T1200Z, schedule).start, k20260615T2200Z);
}

TEST_F(ScheduleTest, TheProcessTimezoneIsNeverTouched) {
  if (!HaveBerlin()) GTEST_SKIP() << "tzdata is not installed";
  ::setenv("TZ", "XYZ3", 1);  // POSIX zone 3 hours west of UTC
  ::tzset();
  const ScheduleConfig berlin = Schedule(90, 6 * kHour, "Europe/Berlin");
  (void)NextWindow(k20261130T0300Z, berlin);
  (void)WindowContaining(k20261130T0300Z, berlin);
  (void)NextWindow(k20261130T0300Z, Schedule(90, 6 * kHour, "UTC"));
  ASSERT_NE(std::getenv("TZ"), nullptr);
  EXPECT_STREQ(std::getenv("TZ"), "XYZ3");
  const auto t = static_cast<std::time_t>(k20261130T0130Z);
  std::tm local{};
  ::localtime_r(&t, &local);
  EXPECT_EQ(local.tm_hour, 22);
  EXPECT_EQ(local.tm_min, 30);
}

// The daemon computes windows while prometheus-cpp's threads run. With a per-call TZ switch
// (setenv + tzset) concurrent calls for different zones read each other's zone; here every
// thread must get its own zone's answer every time.
TEST_F(ScheduleTest, ConcurrentCallsForDifferentZonesEachGetTheirOwnZone) {
  if (!HaveBerlin()) GTEST_SKIP() << "tzdata is not installed";
  const ScheduleConfig berlin = Schedule(0, 6 * kHour, "Europe/Berlin");
  const ScheduleConfig utc = Schedule(0, 6 * kHour, "UTC");
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      const ScheduleConfig& schedule = i % 2 == 0 ? berlin : utc;
      const double expected = i % 2 == 0 ? k20260615T2200Z : k20260616T0000Z;
      for (int n = 0; n < 2000; ++n) {
        if (NextWindow(k20260615T1200Z, schedule).start != expected) ++wrong;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST_F(ScheduleTest, LocalReadsAnIanaNameInTzWithOrWithoutItsColon) {
  if (!HaveBerlin()) GTEST_SKIP() << "tzdata is not installed";
  const ScheduleConfig schedule = Schedule(0, 6 * kHour, "local");
  ::setenv("TZ", "Europe/Berlin", 1);
  EXPECT_EQ(NextWindow(k20260615T1200Z, schedule).start, k20260615T2200Z);
  ::setenv("TZ", ":Europe/Berlin", 1);
  EXPECT_EQ(NextWindow(k20260615T1200Z, schedule).start, k20260615T2200Z);
}

TEST_F(ScheduleTest, LocalWithAPosixRuleInTzIsRefusedNamingTz) {
  ::setenv("TZ", "XYZ3", 1);
  try {
    (void)NextWindow(k20260615T1200Z, Schedule(0, 6 * kHour, "local"));
    FAIL() << "a POSIX TZ rule was accepted as a zone";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("TZ=XYZ3"));
  }
}

TEST_F(ScheduleTest, BerlinSpringForwardShortensTheDayBetweenStarts) {
  if (!HaveBerlin()) GTEST_SKIP() << "tzdata is not installed";
  const ScheduleConfig schedule = Schedule(90, 6 * kHour, "Europe/Berlin");
  EXPECT_EQ(NextWindow(k20260328T0030Z, schedule),
            (Window{k20260329T0030Z, k20260329T0030Z + 6 * kHour}));
  EXPECT_EQ(NextWindow(k20260329T0030Z, schedule).start, k20260329T2330Z);
  EXPECT_EQ(WindowContaining(k20260329T0030Z + kHour, schedule),
            (Window{k20260329T0030Z, k20260329T0030Z + 6 * kHour}));
  EXPECT_EQ(WindowContaining(k20260329T2330Z - 1, schedule), std::nullopt);
}

TEST_F(ScheduleTest, BerlinNonexistentStartIsNormalisedForward) {
  if (!HaveBerlin()) GTEST_SKIP() << "tzdata is not installed";
  // 02:30 does not exist on 2026-03-29 in Berlin: the start is 03:30 CEST.
  const ScheduleConfig schedule = Schedule(2 * 60 + 30, 6 * kHour, "Europe/Berlin");
  EXPECT_EQ(NextWindow(k20260328T1200Z, schedule),
            (Window{k20260329T0130Z, k20260329T0130Z + 6 * kHour}));
  EXPECT_EQ(WindowContaining(k20260329T0130Z + 60, schedule),
            (Window{k20260329T0130Z, k20260329T0130Z + 6 * kHour}));
  EXPECT_EQ(WindowContaining(k20260329T0130Z - 60, schedule), std::nullopt);
  EXPECT_EQ(NextWindow(k20260329T0130Z, schedule).start, k20260330T0030Z);
}

TEST_F(ScheduleTest, BerlinFallBackStartHappensOnceAtTheFirstOccurrence) {
  if (!HaveBerlin()) GTEST_SKIP() << "tzdata is not installed";
  const ScheduleConfig schedule = Schedule(2 * 60 + 30, 6 * kHour, "Europe/Berlin");
  EXPECT_EQ(NextWindow(k20261024T1200Z, schedule).start, k20261025T0030Z);
  // Not the second 02:30 an hour later: the next start is the following day.
  EXPECT_EQ(NextWindow(k20261025T0030Z, schedule).start, k20261026T0130Z);
  EXPECT_EQ(NextWindow(k20261025T0130Z, schedule).start, k20261026T0130Z);
  EXPECT_EQ(WindowContaining(k20261025T0145Z, schedule),
            (Window{k20261025T0030Z, k20261025T0030Z + 6 * kHour}));
}

TEST_F(ScheduleTest, BerlinFallBackLengthensTheDayBetweenStarts) {
  if (!HaveBerlin()) GTEST_SKIP() << "tzdata is not installed";
  const ScheduleConfig schedule = Schedule(90, 6 * kHour, "Europe/Berlin");
  EXPECT_EQ(NextWindow(k20261024T1200Z, schedule).start, k20261024T2330Z);
  EXPECT_EQ(NextWindow(k20261024T2330Z, schedule).start, k20261026T0030Z);
  EXPECT_EQ(WindowContaining(k20261025T0145Z, schedule),
            (Window{k20261024T2330Z, k20261024T2330Z + 6 * kHour}));
}

}  // namespace
}  // namespace trainerd::daemon
