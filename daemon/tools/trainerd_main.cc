// trainerd: the nightly training daemon. See `trainerd --help` and docs/daemon.md.
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <string>

#include "trainerd/daemon/asio.h"
#include "trainerd/daemon/clock.h"
#include "trainerd/daemon/daemon.h"
#include "trainerd/daemon/daemon_config.h"
#include "trainerd/daemon/host_fingerprint.h"
#include "trainerd/daemon/log.h"

namespace {

namespace daemon = trainerd::daemon;
namespace exit_code = trainerd::daemon::exit_code;

constexpr const char* kUsage = R"(usage: trainerd --config FILE [--state-dir DIR] [--once]

Runs the team's nightly training job: at each scheduled start (schedule.start in
schedule.timezone) it resolves the job spec's config version, plans (the last validated
plan, the job's own plan, or the planner), measures the memory ledger, refuses a plan
whose ledger exceeds the budget, checks a plan not yet validated for parity (parity.updates),
trains in a trainer-run child under the completion window, records everything in SQLite, and
releases the model only through the release gate. After an OOM, a crash, a leak or a refused
plan it falls back (last validated plan, re-plan at 75% of the budget, the named baseline; a
failed candidate config rolls back to the last known-good one). At start-up it catches up on an open window
whose cycle has not run, and resumes a run a previous daemon left unfinished.

options:
  --config FILE     daemon config (YAML; bundled default: configs/trainerd.yaml)
  --state-dir DIR   replace the config's state_dir (database, configs, work, releases, logs)
  --once            run one cycle now (window = now + schedule.window), then exit
  --version         print the version
  --help            this text

logging: under systemd (stderr is the journal, as $JOURNAL_STREAM says) journal entries with
  PRIORITY, RUN_ID and EVENT fields (journalctl -u trainerd RUN_ID=7); otherwise stderr lines.

signals: SIGTERM/SIGINT stop (the worker writes a checkpoint; the run is recorded
  interrupted); SIGHUP reloads the config file (applied between cycles).

exit codes:
  0   --once: the run succeeded and its model is the current release;
      as a service: stopped by a signal
  1   internal error (state directory, database); another trainerd holds the state
      directory's lock; an exception out of the cycle (logged)
  2   usage error or invalid config (the message names file, line and key)
  3   --once: the cycle ended without a released model (failed, regressed, deadline)
  75  --once: interrupted by SIGTERM/SIGINT
)";

// trainer-run installed next to trainerd (as build/bin and /usr/bin have them).
std::string DefaultWorkerPath() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "trainer-run" : (self.parent_path() / "trainer-run").string();
}

}  // namespace

int main(int argc, char** argv) {
  std::string config_path;
  std::string state_dir;
  bool once = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      return exit_code::kOk;
    }
    if (arg == "--version") {
      std::cout << "trainerd " << daemon::TrainerdVersion() << "\n";
      return exit_code::kOk;
    }
    if ((arg == "--config" || arg == "--state-dir") && i + 1 < argc) {
      (arg == "--config" ? config_path : state_dir) = argv[++i];
    } else if (arg == "--once") {
      once = true;
    } else {
      std::cerr << "trainerd: unknown or incomplete argument '" << arg << "'\n\n" << kUsage;
      return exit_code::kUsage;
    }
  }
  if (config_path.empty()) {
    std::cerr << "trainerd: --config FILE is required\n\n" << kUsage;
    return exit_code::kUsage;
  }
  trainerd::Result<daemon::DaemonConfig> config = daemon::ParseDaemonConfigFile(config_path);
  if (!config.ok()) {
    daemon::Log(daemon::LogPriority::kError, config.status().message());
    return exit_code::kUsage;
  }
  if (trainerd::Status s = daemon::CheckHostNames(*config); !s.ok()) {
    daemon::Log(daemon::LogPriority::kError, s.message());
    return exit_code::kUsage;
  }
  if (!state_dir.empty()) {
    if (config->socket_path == config->state_dir + "/trainerd.sock") {
      config->socket_path = state_dir + "/trainerd.sock";
    }
    config->state_dir = state_dir;
  }
  if (config->worker_path.empty()) config->worker_path = DefaultWorkerPath();
  if (::access(config->worker_path.c_str(), X_OK) != 0) {
    daemon::Log(daemon::LogPriority::kError,
                config_path + ": worker.path: cannot execute '" + config->worker_path + "'");
    return exit_code::kUsage;
  }

  daemon::asio::io_context io;
  daemon::SystemClock clock;
  daemon::Daemon d(io, *config, config_path, state_dir, clock, {once});
  return daemon::RunMain(io, d.Main());
}
