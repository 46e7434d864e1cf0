// trainerctl: the operator's command line for trainerd. See `trainerctl --help` and
// docs/operations.md.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "trainerctl_format.h"
#include "trainerd/daemon/control_client.h"
#include "trainerd/daemon/control_queries.h"
#include "trainerd/daemon/daemon_config.h"
#include "trainerd/daemon/host_fingerprint.h"
#include "trainerd/store/store.h"

namespace {

namespace daemon = trainerd::daemon;
using Json = nlohmann::json;

constexpr const char* kUsage =
    R"(usage: trainerctl [--config FILE | --state-dir DIR] [--socket PATH] [--json] COMMAND

Talks to trainerd over its control socket. Read-only commands (status, runs, show, configs)
read the database directly when the daemon is not running.

where:
  --config FILE     the daemon config (default /etc/trainerd/trainerd.yaml): the socket,
                    the state directory and the job
  --state-dir DIR   the state directory (socket DIR/trainerd.sock, database DIR/trainerd.db)
  --socket PATH     the control socket, overriding the above
  --json            JSON on stdout: stable field names, bytes and seconds
  --version         print the version

commands:
  status                     phase, current run with progress and ETA against the deadline,
                             next start, active config, last known-good, current release
  runs [--limit N]           the last N runs (default 20)
  show RUN                   the whole run record with its memory, evals and events
  configs                    every config version and its state; * marks the active one
  ledger [--plan FILE]       the job's memory ledger (runs trainer-run --ledger; no daemon)
  plan                       the plan that fits (runs trainer-run --plan-only; no daemon)
  what-if ARGS...            budget arithmetic (trainer-run --what-if ARGS)
  run-now                    start a cycle now
  cancel                     stop the running worker (it writes a checkpoint); run cancelled
  rollback [--to VERSION]    make the last other known-good config version (or VERSION, a
                             hash prefix) active; the job file's version is marked bad
  rollback --model [--release ID]
                             make the previous released model (or release ID) current

exit codes:
  0  ok
  1  other error (the daemon refused the request, the database failed)
  2  usage error
  3  trainerd is not running (for run-now, cancel, rollback)
  4  no such run or config version
)";

constexpr int kOk = 0;
constexpr int kError = 1;
constexpr int kUsageError = 2;
constexpr int kNotRunning = 3;
constexpr int kNoSuchThing = 4;

struct Args {
  std::string config;
  std::string state_dir;
  std::string socket;
  bool json = false;
  std::string command;
  std::vector<std::string> rest;
};

struct Paths {
  std::string socket;
  std::string database;
  std::string job;     // empty without --config
  std::string worker;  // trainer-run
};

int Fail(const std::string& message, int code) {
  std::cerr << "trainerctl: " << message << "\n";
  return code;
}

// Prints a control response; its error decides the exit code.
int Print(const Json& response, const Args& args) {
  if (!response.value("ok", false)) {
    const Json& error = response["error"];
    if (args.json) std::cout << response.dump() << "\n";
    const std::string code = error.value("code", "");
    return Fail(error.value("message", "error"), code == daemon::kNotFound ? kNoSuchThing : kError);
  }
  const Json& result = response["result"];
  if (args.json) {
    std::cout << result.dump(2) << "\n";
  } else if (args.command == "status") {
    std::cout << daemon::FormatStatus(result);
  } else if (args.command == "runs") {
    std::cout << daemon::FormatRuns(result);
  } else if (args.command == "show") {
    std::cout << daemon::FormatShow(result);
  } else if (args.command == "configs") {
    std::cout << daemon::FormatConfigs(result);
  } else {
    std::cout << result.dump() << "\n";
  }
  return kOk;
}

std::string WorkerNextToMe() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "trainer-run" : (self.parent_path() / "trainer-run").string();
}

// trainer-run on the job: ledger, plan, what-if work without a daemon.
int RunWorker(const Paths& paths, const Args& args, std::vector<std::string> mode) {
  std::vector<std::string> argv = {paths.worker};
  if (args.command != "what-if") {
    if (paths.job.empty()) return Fail(args.command + " needs --config (the job)", kUsageError);
    argv.insert(argv.end(), {"--config", paths.job});
  }
  argv.insert(argv.end(), mode.begin(), mode.end());
  argv.insert(argv.end(), args.rest.begin(), args.rest.end());
  if (args.json) argv.push_back("--json");
  std::vector<char*> raw;
  for (std::string& a : argv) raw.push_back(a.data());
  raw.push_back(nullptr);
  ::execv(raw[0], raw.data());
  return Fail("cannot run " + paths.worker, kError);
}

Json Request(const Args& args) {
  Json request = {{"command", args.command}};
  for (std::size_t i = 0; i < args.rest.size(); ++i) {
    const std::string& a = args.rest[i];
    const bool has_value = i + 1 < args.rest.size();
    if (a == "--limit" && has_value) {
      request["limit"] = std::atoi(args.rest[++i].c_str());
    } else if (a == "--to" && has_value) {
      request["to"] = args.rest[++i];
    } else if (a == "--release" && has_value) {
      request["release"] = std::atoll(args.rest[++i].c_str());
    } else if (a == "--model") {
      request["model"] = true;
    } else if (args.command == "show" && !request.contains("run")) {
      char* end = nullptr;
      const long long id = std::strtoll(a.c_str(), &end, 10);
      if (a.empty() || *end != '\0') throw std::invalid_argument("show: RUN must be a run id");
      request["run"] = id;
    } else {
      throw std::invalid_argument(args.command + ": unexpected argument '" + a + "'");
    }
  }
  if (args.command == "show" && !request.contains("run")) {
    throw std::invalid_argument("show needs RUN");
  }
  return request;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      return kOk;
    }
    if (a == "--version") {
      std::cout << "trainerctl " << trainerd::daemon::TrainerdVersion() << "\n";
      return kOk;
    }
    if (args.command.empty() && a == "--config" && has_value) {
      args.config = argv[++i];
    } else if (args.command.empty() && a == "--state-dir" && has_value) {
      args.state_dir = argv[++i];
    } else if (args.command.empty() && a == "--socket" && has_value) {
      args.socket = argv[++i];
    } else if (a == "--json") {
      args.json = true;
    } else if (args.command.empty() && a.rfind("--", 0) != 0) {
      args.command = a;
    } else if (!args.command.empty()) {
      args.rest.push_back(a);
    } else {
      std::cerr << "trainerctl: unknown option '" << a << "'\n\n" << kUsage;
      return kUsageError;
    }
  }
  static const std::vector<std::string> kCommands = {"status", "runs",    "show",    "configs",
                                                     "ledger", "plan",    "what-if", "run-now",
                                                     "cancel", "rollback"};
  if (std::find(kCommands.begin(), kCommands.end(), args.command) == kCommands.end()) {
    std::cerr << "trainerctl: "
              << (args.command.empty() ? "a COMMAND is required"
                                       : "unknown command '" + args.command + "'")
              << "\n\n"
              << kUsage;
    return kUsageError;
  }

  Paths paths;
  paths.worker = WorkerNextToMe();
  if (args.config.empty() && args.state_dir.empty() &&
      std::filesystem::exists("/etc/trainerd/trainerd.yaml")) {
    args.config = "/etc/trainerd/trainerd.yaml";
  }
  if (!args.config.empty()) {
    trainerd::Result<daemon::DaemonConfig> config = daemon::ParseDaemonConfigFile(args.config);
    if (!config.ok()) return Fail(config.status().message(), kUsageError);
    paths.socket = config->socket_path;
    paths.database = config->database_path();
    paths.job = config->job_path;
    if (!config->worker_path.empty()) paths.worker = config->worker_path;
  }
  if (!args.state_dir.empty()) {
    paths.socket = args.state_dir + "/trainerd.sock";
    paths.database = args.state_dir + "/trainerd.db";
  }
  if (!args.socket.empty()) paths.socket = args.socket;

  if (args.command == "ledger") return RunWorker(paths, args, {"--ledger"});
  if (args.command == "plan") return RunWorker(paths, args, {"--plan-only"});
  if (args.command == "what-if") return RunWorker(paths, args, {"--what-if"});
  if (paths.socket.empty()) {
    return Fail("where is trainerd? give --config FILE, --state-dir DIR or --socket PATH",
                kUsageError);
  }

  Json request;
  try {
    request = Request(args);
  } catch (const std::invalid_argument& e) {
    std::cerr << "trainerctl: " << e.what() << "\n\n" << kUsage;
    return kUsageError;
  }
  trainerd::Result<Json> response = daemon::SendControlRequest(paths.socket, request);
  if (response.ok()) return Print(*response, args);
  const bool read_only = args.command == "status" || args.command == "runs" ||
                         args.command == "show" || args.command == "configs";
  if (response.status().code() != trainerd::Status::Code::kNotFound) {
    return Fail(response.status().message(), kError);
  }
  if (!read_only) return Fail(response.status().message(), kNotRunning);
  // The daemon is down: answer from the database.
  if (paths.database.empty()) return Fail(response.status().message(), kNotRunning);
  trainerd::store::StoreOptions options;
  options.check_integrity_on_open = false;
  trainerd::Result<std::unique_ptr<trainerd::store::Store>> store =
      trainerd::store::Store::OpenReadOnly(paths.database, options);
  if (!store.ok()) {
    return Fail(response.status().message() + "; and the database: " + store.status().message(),
                kNotRunning);
  }
  Json answer = daemon::AnswerFromStore(**store, paths.job, request);
  if (args.command == "status" && answer.value("ok", false)) {
    answer["result"]["daemon"] = {{"running", false}};
    answer["result"]["current_run"] = nullptr;
    answer["result"]["next_start"] = nullptr;
  }
  return Print(answer, args);
}
