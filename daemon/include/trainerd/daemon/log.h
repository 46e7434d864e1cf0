// The daemon's log. Under systemd (stderr connected to the journal, as $JOURNAL_STREAM says)
// each line is a journal entry with its priority and fields: SYSLOG_IDENTIFIER=trainerd,
// RUN_ID and EVENT when the line is about a run or an event, so that
// `journalctl -u trainerd RUN_ID=7` or `EVENT=fallback` finds them. Anywhere else it is a
// plain line on stderr, "trainerd: [run N: ][EVENT: ]message". Thread-safe; the destination is
// decided once, at the first line.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace trainerd::daemon {

// syslog(3) priorities, as the journal's PRIORITY= field.
enum class LogPriority { kError = 3, kWarning = 4, kNotice = 5, kInfo = 6 };

struct LogFields {
  std::optional<std::int64_t> run_id;  // RUN_ID=
  std::string event;                   // EVENT=, the run event's kind; empty for none
};

void Log(LogPriority priority, const std::string& message, const LogFields& fields = {});

}  // namespace trainerd::daemon
