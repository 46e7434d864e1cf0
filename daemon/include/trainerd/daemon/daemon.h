// The trainerd process: opens the store, recovers from its own crash (runs left running
// become interrupted; a worker that outlived it is stopped; a run whose window is still open
// resumes from its checkpoint), then runs the nightly cycle at each scheduled start, catching
// up at start-up on a window whose cycle has not happened. One Boost.Asio io_context thread;
// SIGTERM/SIGINT stop gracefully (the worker checkpoints, the run is recorded interrupted),
// SIGHUP reloads the config between cycles. See docs/daemon.md.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "trainerd/daemon/asio.h"
#include "trainerd/daemon/clock.h"
#include "trainerd/daemon/control_server.h"
#include "trainerd/daemon/daemon_config.h"
#include "trainerd/daemon/daemon_metrics.h"
#include "trainerd/daemon/file_store.h"
#include "trainerd/daemon/instance_lock.h"
#include "trainerd/daemon/nightly_cycle.h"
#include "trainerd/daemon/operator_commands.h"
#include "trainerd/daemon/outcome_watch.h"
#include "trainerd/daemon/process_launcher.h"
#include "trainerd/daemon/retention.h"
#include "trainerd/daemon/status_cache.h"
#include "trainerd/daemon/systemd_notifier.h"
#include "trainerd/daemon/worker_supervisor.h"
#include "trainerd/store/store.h"

namespace trainerd::daemon {

// trainerd's exit codes (also in `trainerd --help` and docs/daemon.md).
namespace exit_code {
inline constexpr int kOk = 0;            // --once: the cycle's run succeeded and was released
inline constexpr int kInternal = 1;      // the store or the state directory failed
inline constexpr int kUsage = 2;         // bad arguments or an invalid daemon config
inline constexpr int kCycleFailed = 3;   // --once: the cycle ended without a released model
inline constexpr int kInterrupted = 75;  // stopped by SIGTERM/SIGINT
}  // namespace exit_code

// Runs `main` on `io` until it returns, and returns its exit code. An exception out of `main`
// is logged and stops the loop with exit_code::kInternal: the control socket and the
// watchdog ping live on the same loop, and would otherwise keep a daemon that runs no more
// cycles looking healthy to systemd and to operators.
int RunMain(asio::io_context& io, asio::awaitable<int> main);

class Daemon {
 public:
  struct Options {
    bool once = false;  // run one cycle now, then exit
  };

  // `config_path` is re-read on SIGHUP; `state_dir_override` (--state-dir) replaces the
  // config's state_dir then too.
  Daemon(asio::io_context& io, DaemonConfig config, std::string config_path,
         std::string state_dir_override, const Clock& clock, Options options);

  // Runs until stopped (or the one cycle of --once); returns the process exit code.
  asio::awaitable<int> Main();

 private:
  Status Recover();
  void RestoreMetrics();
  void StopStaleWorker();
  bool CycleDue(const Window& window);
  std::optional<std::int64_t> RunToResume(double now);
  void OnSignal(int signal);
  void ApplyPendingReload();
  void Report(const CycleProgress& progress);
  void ArmWatchdog();
  Status StartControlServer();
  nlohmann::json HandleControl(const nlohmann::json& request, const ControlPeer& peer);
  // OutcomeWatch::Check, its failure logged; re-armed every outcomes.check_interval.
  void CheckOutcomes();
  void ArmOutcomeCheck();
  // Retention::Apply, its failure logged.
  void ApplyRetention();

  asio::io_context& io_;
  DaemonConfig config_;
  std::optional<DaemonConfig> pending_config_;
  std::string config_path_;
  std::string state_dir_override_;
  const Clock& clock_;
  Options options_;
  SystemdNotifier notifier_;
  std::optional<InstanceLock> lock_;  // this state directory's, held from the start of Main
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<store::Store> metric_store_;       // the cycle's MetricWriter's connection
  std::unique_ptr<StoredStatusCache> status_cache_;  // the stored part of `status`
  PosixProcessLauncher launcher_;
  LocalFileStore files_;
  std::unique_ptr<WorkerSupervisor> supervisor_;
  std::unique_ptr<DaemonMetrics> metrics_;
  std::unique_ptr<MetricsEndpoint> metrics_endpoint_;
  std::unique_ptr<ControlServer> control_;
  std::unique_ptr<OutcomeWatch> outcome_watch_;
  std::unique_ptr<OperatorCommands> operator_commands_;  // rollback, outcome, release
  std::unique_ptr<Retention> retention_;
  CycleProgress progress_;  // the last progress report of the running cycle
  bool run_now_ = false;    // trainerctl run-now: start a cycle at once
  asio::signal_set signals_;
  asio::steady_timer wake_;
  asio::steady_timer watchdog_;
  asio::steady_timer outcome_timer_;
  bool stopping_ = false;
  bool cycle_running_ = false;
  std::optional<double> last_cycle_window_;  // start of the window last run by this process
  double last_status_at_ = 0;
  std::string last_phase_;
  double last_printed_at_ = 0;
};

}  // namespace trainerd::daemon
