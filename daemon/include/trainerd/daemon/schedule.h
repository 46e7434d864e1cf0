// The nightly schedule: when a window opens (a local wall-clock time in the configured
// timezone) and when it closes. Times are Unix seconds (UTC), possibly fractional.
//
// Local times come from the IANA time-zone database in /usr/share/zoneinfo through Howard
// Hinnant's date library (Debian's libhowardhinnant-date-dev; C++20's <chrono> zones are not
// in GCC 12). Nothing here reads or writes the process's local-time state (no setenv, tzset,
// localtime or mktime), so the calls are safe while other threads run; "UTC" needs no
// database at all.
//
// Daylight saving: a start time that does not exist on a spring-forward day (02:30 in
// Europe/Berlin on 2026-03-29) is read in the offset before the change (03:30 local, the same
// instant as 02:30 in the pre-change offset). A start time that occurs twice on a fall-back
// day opens one window, at its first occurrence.
#pragma once

#include <optional>
#include <string>

#include "trainerd/daemon/daemon_config.h"

namespace date {
class time_zone;
}

namespace trainerd::daemon {

struct Window {
  double start = 0;     // Unix seconds
  double deadline = 0;  // Unix seconds; the window is [start, deadline)
  bool operator==(const Window&) const = default;
};

// The zone a schedule's `timezone` names: "UTC", an IANA name ("Europe/Berlin"), or "local":
// the IANA name in TZ (with or without its leading ':') when TZ is set, else /etc/localtime.
// Throws std::runtime_error naming the zone (and TZ) when the database does not have it; a
// POSIX rule string in TZ ("CET-1CEST") is not a zone name and is refused.
const date::time_zone* ResolveTimezone(const std::string& name);

// The nightly window that contains `now` (start <= now < deadline), if any. start = the latest
// scheduled start at or before `now` (start_minute in schedule.timezone), deadline = start +
// window.
std::optional<Window> WindowContaining(double now, const ScheduleConfig& schedule);
// The first window whose start is strictly after `now`.
Window NextWindow(double now, const ScheduleConfig& schedule);
// A window starting at `now` (for `trainerd --once` / run-now): {now, now + window}.
Window WindowStartingAt(double now, const ScheduleConfig& schedule);
// "2026-11-30T01:30:00Z": UTC, whole seconds (rounded down), for messages.
std::string FormatUtc(double unix_seconds);

}  // namespace trainerd::daemon
