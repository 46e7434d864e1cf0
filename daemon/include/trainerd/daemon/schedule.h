// The nightly schedule: when a window opens (a local wall-clock time in the configured
// timezone) and when it closes. Times are Unix seconds (UTC), possibly fractional.
//
// Local times are computed with the C library: each call temporarily sets the TZ environment
// variable to the schedule's zone ("UTC" -> "UTC0", an IANA name -> ":Europe/Berlin",
// "local" -> TZ left as it is), calls tzset() and localtime_r/mktime, then restores TZ and
// calls tzset() again. NOT thread-safe: no other thread may read or write the environment
// or local time during a call (the daemon runs its loop on one thread).
//
// Daylight saving: a start time that does not exist on a spring-forward day (02:30 in
// Europe/Berlin on 2026-03-29) is what mktime normalises it to (03:30 local, the same
// instant as 02:30 in the pre-change offset). A start time that occurs twice on a fall-back
// day opens one window, at its first occurrence.
#pragma once

#include <optional>
#include <string>

#include "trainerd/daemon/daemon_config.h"

namespace trainerd::daemon {

struct Window {
  double start = 0;     // Unix seconds
  double deadline = 0;  // Unix seconds; the window is [start, deadline)
  bool operator==(const Window&) const = default;
};

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
