#include "trainerd/daemon/schedule.h"

#include <cmath>
#include <cstdlib>
#include <ctime>
#include <initializer_list>
#include <optional>
#include <string>

namespace trainerd::daemon {
namespace {

// Sets TZ to `zone` for the lifetime of the object and restores the previous value (or its
// absence) afterwards, calling tzset() both times so localtime_r sees the change.
class ScopedTimezone {
 public:
  explicit ScopedTimezone(const std::string& zone) {
    if (const char* previous = std::getenv("TZ")) previous_ = previous;
    if (zone != "local") {
      const std::string tz = zone == "UTC" ? "UTC0" : ":" + zone;
      ::setenv("TZ", tz.c_str(), /*overwrite=*/1);
    }
    ::tzset();
  }
  ~ScopedTimezone() {
    if (previous_) {
      ::setenv("TZ", previous_->c_str(), /*overwrite=*/1);
    } else {
      ::unsetenv("TZ");
    }
    ::tzset();
  }
  ScopedTimezone(const ScopedTimezone&) = delete;
  ScopedTimezone& operator=(const ScopedTimezone&) = delete;

 private:
  std::optional<std::string> previous_;
};

// The local calendar day `offset` days after the one containing `t` (year, month, day in
// tm fields; the rest zero). Noon is used to step days: no DST change moves it off its day.
std::tm LocalDay(std::time_t t, int offset) {
  std::tm day{};
  ::localtime_r(&t, &day);
  day.tm_mday += offset;
  day.tm_hour = 12;
  day.tm_min = 0;
  day.tm_sec = 0;
  day.tm_isdst = -1;
  const std::time_t noon = std::mktime(&day);
  ::localtime_r(&noon, &day);
  return day;
}

// The scheduled start on local calendar day `day`. A wall-clock time that occurs twice (fall
// back) gives its first occurrence; one that does not occur (spring forward) gives what
// mktime normalises it to.
std::time_t StartOn(const std::tm& day, int start_minute) {
  std::tm wanted = day;
  wanted.tm_hour = start_minute / 60;
  wanted.tm_min = start_minute % 60;
  wanted.tm_sec = 0;

  std::optional<std::time_t> first;
  for (const int isdst : {0, 1}) {
    std::tm attempt = wanted;
    attempt.tm_isdst = isdst;
    const std::time_t t = std::mktime(&attempt);
    if (t == static_cast<std::time_t>(-1)) continue;
    std::tm back{};
    ::localtime_r(&t, &back);
    // Only an instant that really shows this wall-clock time on this day counts.
    if (back.tm_year == wanted.tm_year && back.tm_mon == wanted.tm_mon &&
        back.tm_mday == wanted.tm_mday && back.tm_hour == wanted.tm_hour &&
        back.tm_min == wanted.tm_min && back.tm_isdst == isdst) {
      if (!first || t < *first) first = t;
    }
  }
  if (first) return *first;
  std::tm normalised = wanted;
  normalised.tm_isdst = -1;
  return std::mktime(&normalised);
}

}  // namespace

std::optional<Window> WindowContaining(double now, const ScheduleConfig& schedule) {
  const ScopedTimezone zone(schedule.timezone);
  const auto whole = static_cast<std::time_t>(std::floor(now));
  // Starts increase day by day, so the first one at or before `now`, walking back from
  // tomorrow, is the latest. Tomorrow is included because normalisation can move a start
  // across midnight.
  for (int offset = 1; offset >= -2; --offset) {
    const auto start = static_cast<double>(StartOn(LocalDay(whole, offset), schedule.start_minute));
    if (start <= now) {
      const double deadline = start + schedule.window_seconds;
      if (now < deadline) return Window{start, deadline};
      return std::nullopt;
    }
  }
  return std::nullopt;
}

Window NextWindow(double now, const ScheduleConfig& schedule) {
  const ScopedTimezone zone(schedule.timezone);
  const auto whole = static_cast<std::time_t>(std::floor(now));
  for (int offset = -1; offset <= 3; ++offset) {
    const auto start = static_cast<double>(StartOn(LocalDay(whole, offset), schedule.start_minute));
    if (start > now) return Window{start, start + schedule.window_seconds};
  }
  // Unreachable for times mktime can represent: a start exists on every local day.
  return Window{now + 24 * 3600.0, now + 24 * 3600.0 + schedule.window_seconds};
}

Window WindowStartingAt(double now, const ScheduleConfig& schedule) {
  return Window{now, now + schedule.window_seconds};
}

std::string FormatUtc(double unix_seconds) {
  const auto whole = static_cast<std::time_t>(std::floor(unix_seconds));
  std::tm utc{};
  ::gmtime_r(&whole, &utc);
  char buffer[32];
  std::strftime(buffer, sizeof(buffer), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buffer;
}

}  // namespace trainerd::daemon
