// The control commands that change what the daemon serves or will run, on the operator's
// word: model and config rollback, outcome imports, release pin/unpin (and release show,
// which reads the same records). Each request is checked field by field and answered with
// Ok() or Error() (control_queries.h); whatever it changes is recorded in the event log. Not
// thread-safe: the daemon's loop calls it (a fuzz harness drives it alone).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "trainerd/daemon/clock.h"
#include "trainerd/daemon/daemon_config.h"
#include "trainerd/daemon/daemon_metrics.h"
#include "trainerd/daemon/file_store.h"
#include "trainerd/daemon/outcome_watch.h"
#include "trainerd/store/store.h"

namespace trainerd::daemon {

class OperatorCommands {
 public:
  // `config` is read at each call (the daemon's, reloaded on SIGHUP); `metrics` may be null.
  OperatorCommands(const DaemonConfig& config, store::Store& store, FileStore& files,
                   const Clock& clock, DaemonMetrics* metrics, OutcomeWatch& outcome_watch);

  // Whether Handle answers `command`: rollback, outcome and release.
  static bool Handles(const std::string& command);
  // The answer to a request whose command Handles(). The caller runs the outcome watch after
  // a successful outcome import (when no cycle is releasing).
  nlohmann::json Handle(const nlohmann::json& request);

 private:
  nlohmann::json Rollback(const nlohmann::json& request);
  nlohmann::json RollbackModel(const nlohmann::json& request);
  nlohmann::json RollbackConfig(const nlohmann::json& request);
  nlohmann::json RecordOutcomes(const nlohmann::json& request);
  nlohmann::json ReleaseCommand(const nlohmann::json& request);
  // The release an outcome names: an id, or a prefix of its model's hash (the newest
  // release of that model that went live).
  Result<store::Release> OutcomeRelease(const std::string& name);

  const DaemonConfig& config_;
  store::Store& store_;
  FileStore& files_;
  const Clock& clock_;
  DaemonMetrics* metrics_;
  OutcomeWatch& outcome_watch_;
};

}  // namespace trainerd::daemon
