// Schedule start times relative to now, for daemon configs in tests.
#pragma once

#include <ctime>
#include <string>

namespace trainerd::testing {

// "HH:MM" in UTC, `offset_seconds` from now.
inline std::string UtcClock(int offset_seconds) {
  const std::time_t t = std::time(nullptr) + offset_seconds;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char text[8];
  std::strftime(text, sizeof text, "%H:%M", &tm);
  return text;
}

}  // namespace trainerd::testing
