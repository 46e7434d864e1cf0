#include "trainerd/daemon/worker_supervisor.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>

#include "trainerd/common/atomic_file.h"

namespace trainerd::daemon {

WorkerSupervisor::WorkerSupervisor(asio::io_context& io, const Clock& clock,
                                   ProcessLauncher& launcher, std::string pid_file)
    : io_(io),
      clock_(clock),
      launcher_(launcher),
      pid_file_(std::move(pid_file)),
      term_timer_(io),
      kill_timer_(io),
      stop_kill_timer_(io) {}

void WorkerSupervisor::ScheduleSignal(asio::steady_timer& timer, double at, int signal) {
  timer.expires_after(TimerDelay(at - clock_.Now()));
  timer.async_wait([this, signal](const boost::system::error_code& ec) {
    if (ec || child_ == nullptr) return;
    if (signal == SIGTERM) Stop(StoppedBy::kDeadline, 0);
    child_->Signal(signal);
  });
}

asio::awaitable<Result<ProcessExit>> WorkerSupervisor::Run(
    const LaunchSpec& spec, const Limits& limits,
    const std::function<void(const std::string&)>& on_line) {
  Result<std::unique_ptr<ChildProcess>> child = launcher_.Launch(io_, spec);
  if (!child.ok()) co_return child.status();
  child_ = child->get();
  if (!pid_file_.empty()) {
    (void)WriteFileAtomically(pid_file_, std::to_string(child_->pid()) + "\n");
  }
  ScheduleSignal(term_timer_, limits.sigterm_at, SIGTERM);
  ScheduleSignal(kill_timer_, limits.sigkill_at, SIGKILL);
  if (stopped_by_ != StoppedBy::kNobody) child_->Signal(SIGTERM);  // stopped while starting
  while (std::optional<std::string> line = co_await child_->ReadLine()) on_line(*line);
  const ProcessExit exit = co_await child_->Wait();
  term_timer_.cancel();
  kill_timer_.cancel();
  stop_kill_timer_.cancel();
  child_ = nullptr;
  if (!pid_file_.empty()) std::remove(pid_file_.c_str());
  co_return exit;
}

void WorkerSupervisor::Stop(StoppedBy why, double grace_seconds) {
  if (stopped_by_ == StoppedBy::kNobody) stopped_by_ = why;
  if (child_ == nullptr || why == StoppedBy::kDeadline) return;  // the deadline timers signal
  child_->Signal(SIGTERM);
  stop_kill_timer_.expires_after(TimerDelay(grace_seconds));
  stop_kill_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec && child_ != nullptr) child_->Signal(SIGKILL);
  });
}

}  // namespace trainerd::daemon
