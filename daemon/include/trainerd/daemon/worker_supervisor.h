// Runs the cycle's child processes (planner, ledger, training worker) one at a time under
// the window's limits: SIGTERM at the deadline less the grace period (the worker finishes
// its update, writes a checkpoint and exits 75), SIGKILL at the deadline. The daemon's stop
// and an operator's cancel go through Stop(). The running child's pid is kept in a file so
// that a restarted daemon can find a worker that outlived it.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "trainerd/common/status.h"
#include "trainerd/daemon/asio.h"
#include "trainerd/daemon/child_process.h"
#include "trainerd/daemon/clock.h"
#include "trainerd/daemon/policy.h"
#include "trainerd/daemon/process_launcher.h"

namespace trainerd::daemon {

class WorkerSupervisor {
 public:
  using StoppedBy = WorkerExit::StoppedBy;

  struct Limits {
    double sigterm_at = 0;  // clock seconds
    double sigkill_at = 0;  // clock seconds, >= sigterm_at
  };

  // `pid_file`: where the running child's pid is written ("" for none). `launcher` starts
  // the children.
  WorkerSupervisor(asio::io_context& io, const Clock& clock, ProcessLauncher& launcher,
                   std::string pid_file);

  // Runs `spec` to its exit, calling `on_line` with each line of its stdout. An error only
  // when the child could not be started. The arguments are referenced until the child has
  // exited: pass named objects, never temporaries (GCC 12 mishandles temporaries in co_await
  // expressions).
  asio::awaitable<Result<ProcessExit>> Run(const LaunchSpec& spec, const Limits& limits,
                                           const std::function<void(const std::string&)>& on_line);

  // Stops the running child (SIGTERM now, SIGKILL after `grace_seconds`) and refuses to
  // start new ones until Reset(). The first reason given sticks.
  void Stop(StoppedBy why, double grace_seconds);
  // The running child's pid; none between children.
  std::optional<pid_t> running_pid() const {
    return child_ ? std::optional<pid_t>(child_->pid()) : std::nullopt;
  }
  // Why the children were stopped, kNobody if they were not.
  StoppedBy stopped_by() const { return stopped_by_; }
  // Clears a Stop() for the next cycle.
  void Reset() { stopped_by_ = StoppedBy::kNobody; }

 private:
  void ScheduleSignal(asio::steady_timer& timer, double at, int signal);

  asio::io_context& io_;
  const Clock& clock_;
  ProcessLauncher& launcher_;
  std::string pid_file_;
  ChildProcess* child_ = nullptr;  // the running child, owned by Run()
  StoppedBy stopped_by_ = StoppedBy::kNobody;
  asio::steady_timer term_timer_;
  asio::steady_timer kill_timer_;
  asio::steady_timer stop_kill_timer_;
};

}  // namespace trainerd::daemon
