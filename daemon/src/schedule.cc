#include "trainerd/daemon/schedule.h"

#include <date/tz.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <optional>
#include <stdexcept>
#include <string>

namespace trainerd::daemon {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;

// A schedule's timezone: local wall-clock time from an instant and back. Null `zone_` is UTC,
// which needs no time-zone database.
class Zone {
 public:
  explicit Zone(const std::string& name) : zone_(name == "UTC" ? nullptr : ResolveTimezone(name)) {}

  date::local_seconds LocalOf(date::sys_seconds t) const {
    if (!zone_) return date::local_seconds{t.time_since_epoch()};
    return zone_->to_local(t);
  }
  // The instant showing `local`. A wall-clock time that occurs twice (fall back) gives its
  // first occurrence; one that does not occur (spring forward) is read in the offset before
  // the change (02:30 CET, i.e. 03:30 CEST): both are `local` minus the earlier offset.
  date::sys_seconds InstantOf(date::local_seconds local) const {
    if (!zone_) return date::sys_seconds{local.time_since_epoch()};
    const date::local_info info = zone_->get_info(local);
    return date::sys_seconds{local.time_since_epoch() - info.first.offset};
  }

 private:
  const date::time_zone* zone_;
};

// The scheduled start on the local calendar day `offset` days after the one containing `now`.
double StartOnDay(const Zone& zone, double now, int offset, int start_minute) {
  const date::sys_seconds whole{seconds{static_cast<long long>(std::floor(now))}};
  const date::local_days day = date::floor<date::days>(zone.LocalOf(whole)) + date::days{offset};
  return static_cast<double>(
      zone.InstantOf(day + minutes{start_minute}).time_since_epoch().count());
}

}  // namespace

const date::time_zone* ResolveTimezone(const std::string& name) {
  try {
    if (name == "UTC") return date::locate_zone("Etc/UTC");
    if (name != "local") return date::locate_zone(name);
    const char* tz = std::getenv("TZ");
    if (tz == nullptr || *tz == '\0') return date::current_zone();
    std::string zone = tz;
    if (zone.front() == ':') zone.erase(0, 1);
    return date::locate_zone(zone);
  } catch (const std::runtime_error& e) {
    const char* tz = std::getenv("TZ");
    const std::string which = name != "local" ? name
                              : tz && *tz     ? "local (TZ=" + std::string(tz) + ")"
                                              : "local (/etc/localtime)";
    throw std::runtime_error("timezone " + which +
                             " is not in the time-zone database: " + e.what());
  }
}

std::optional<Window> WindowContaining(double now, const ScheduleConfig& schedule) {
  const Zone zone(schedule.timezone);
  // Starts increase day by day, so the first one at or before `now`, walking back from
  // tomorrow, is the latest. Tomorrow is included because normalisation can move a start
  // across midnight.
  for (int offset = 1; offset >= -2; --offset) {
    const double start = StartOnDay(zone, now, offset, schedule.start_minute);
    if (start <= now) {
      const double deadline = start + schedule.window_seconds;
      if (now < deadline) return Window{start, deadline};
      return std::nullopt;
    }
  }
  return std::nullopt;
}

Window NextWindow(double now, const ScheduleConfig& schedule) {
  const Zone zone(schedule.timezone);
  for (int offset = -1; offset <= 3; ++offset) {
    const double start = StartOnDay(zone, now, offset, schedule.start_minute);
    if (start > now) return Window{start, start + schedule.window_seconds};
  }
  // Unreachable: a start exists on every local day.
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
