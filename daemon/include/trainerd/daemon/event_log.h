// Every event the daemon records goes two ways: into the run store (what `trainerctl show`
// and the report read) and into the log (under systemd, a journal entry whose EVENT and
// RUN_ID fields are the event's kind and run, and whose priority is its severity).
#pragma once

#include "trainerd/store/store.h"

namespace trainerd::daemon {

// Stores `event` and logs its message. A store failure is logged too, and otherwise ignored:
// losing an event must not stop a cycle.
void RecordAndLog(store::Store& store, const store::Event& event);

}  // namespace trainerd::daemon
