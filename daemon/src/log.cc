#include "trainerd/daemon/log.h"

#include <sys/stat.h>
#include <sys/uio.h>
#include <systemd/sd-journal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace trainerd::daemon {

namespace {

// $JOURNAL_STREAM names the device and inode of stderr ("DEV:INO", what systemd sets for a
// service whose output goes to the journal); decided once.
bool StderrIsTheJournal() {
  static const bool journal = [] {
    const char* stream = std::getenv("JOURNAL_STREAM");
    unsigned long long device = 0, inode = 0;
    if (stream == nullptr || std::sscanf(stream, "%llu:%llu", &device, &inode) != 2) return false;
    struct stat st {};
    return ::fstat(STDERR_FILENO, &st) == 0 && st.st_dev == device && st.st_ino == inode;
  }();
  return journal;
}

bool SendToJournal(LogPriority priority, const std::string& message, const LogFields& fields) {
  std::vector<std::string> entries = {"MESSAGE=" + message,
                                      "PRIORITY=" + std::to_string(static_cast<int>(priority)),
                                      "SYSLOG_IDENTIFIER=trainerd"};
  if (fields.run_id) entries.push_back("RUN_ID=" + std::to_string(*fields.run_id));
  if (!fields.event.empty()) entries.push_back("EVENT=" + fields.event);
  std::vector<iovec> iov;
  for (std::string& e : entries) iov.push_back({e.data(), e.size()});
  return sd_journal_sendv(iov.data(), static_cast<int>(iov.size())) >= 0;
}

}  // namespace

void Log(LogPriority priority, const std::string& message, const LogFields& fields) {
  if (StderrIsTheJournal() && SendToJournal(priority, message, fields)) return;
  std::string line = "trainerd: ";
  if (fields.run_id) line += "run " + std::to_string(*fields.run_id) + ": ";
  if (!fields.event.empty()) line += fields.event + ": ";
  line += message + "\n";
  std::fputs(line.c_str(), stderr);  // one call: lines of two threads never interleave
}

}  // namespace trainerd::daemon
