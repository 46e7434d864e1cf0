#include "trainerd/daemon/event_log.h"

#include "trainerd/daemon/log.h"

namespace trainerd::daemon {

namespace {

LogPriority PriorityOf(store::Severity severity) {
  switch (severity) {
    case store::Severity::kError:
      return LogPriority::kError;
    case store::Severity::kWarning:
      return LogPriority::kWarning;
    case store::Severity::kInfo:
      break;
  }
  return LogPriority::kInfo;
}

}  // namespace

void RecordAndLog(store::Store& store, const store::Event& event) {
  const LogFields fields{event.run_id, event.kind};
  if (Result<std::int64_t> id = store.RecordEvent(event); !id.ok()) {
    Log(LogPriority::kError, "cannot record event " + event.kind + ": " + id.status().message(),
        fields);
  }
  Log(PriorityOf(event.severity), event.message, fields);
}

}  // namespace trainerd::daemon
