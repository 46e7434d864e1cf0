// How the supervisor starts its children, behind an interface so that tests can inject
// faults (a worker that crashes, one that cannot start) into a real cycle.
#pragma once

#include <memory>

#include "trainerd/common/status.h"
#include "trainerd/daemon/asio.h"
#include "trainerd/daemon/child_process.h"

namespace trainerd::daemon {

class ProcessLauncher {
 public:
  virtual ~ProcessLauncher() = default;
  virtual Result<std::unique_ptr<ChildProcess>> Launch(asio::io_context& io,
                                                       const LaunchSpec& spec) = 0;
};

// Real processes: ChildProcess::Spawn.
class PosixProcessLauncher final : public ProcessLauncher {
 public:
  Result<std::unique_ptr<ChildProcess>> Launch(asio::io_context& io,
                                               const LaunchSpec& spec) override {
    return ChildProcess::Spawn(io, spec);
  }
};

}  // namespace trainerd::daemon
