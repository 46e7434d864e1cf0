// trainerctl: the operator's command line for trainerd. See `trainerctl --help` and
// docs/operations.md.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <charconv>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "trainerctl_format.h"
#include "trainerd/common/atomic_file.h"
#include "trainerd/common/bounded_file.h"
#include "trainerd/daemon/control_client.h"
#include "trainerd/daemon/control_queries.h"
#include "trainerd/daemon/daemon_config.h"
#include "trainerd/daemon/host_fingerprint.h"
#include "trainerd/daemon/outcome_lines.h"
#include "trainerd/store/store.h"
#include "trainerd/trainer/spec/profile_text.h"

namespace {

namespace daemon = trainerd::daemon;
using Json = nlohmann::json;

constexpr const char* kUsage =
    R"(usage: trainerctl [--config FILE | --state-dir DIR] [--socket PATH] [--json] COMMAND

Talks to trainerd over its control socket. Read-only commands (status, runs, show, report,
profile, configs, release show) read the database directly when the daemon is not running. Options go before or
after the command, as `--opt VALUE` or `--opt=VALUE`; everything after `what-if` goes to
trainer-run.

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
  show RUN                   the whole run record with its memory, evals, events, and its
                             release with its outcomes
  report RUN [--output FILE] the run's report page (one HTML file: plan, memory ledger,
                             curves, the night's fallbacks, release gate) on stdout or
                             in FILE; with --json the facts it is drawn from
  profile RUN                the op profile of the run's plan, measured before its first
                             training (where an update spends its time, by op group, on
                             the roofline of the machine; the top ops)
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
  outcome add --release R --slice NAME --metric NAME --value X [--count N] [--at TIME]
                             record an outcome the serving side measured of release R (an
                             id, or 12+ hex digits of the sha256 its model.json names):
                             X is the mean of N outcomes (default 1) up to TIME (Unix
                             seconds or 2026-12-05T10:00:00Z; default now)
  outcome import FILE        record a file of outcomes in one transaction: JSON lines or
                             CSV with the columns release, slice, metric, value and
                             optionally count and at; a bad line refuses the whole file
  release show ID            a release: its run, gate, pin, withdrawal, and its outcomes
                             beside those of the release it replaced
  release pin ID             its outcomes never roll it back (unpin: they may again)

exit codes:
  0  ok
  1  other error (the daemon refused the request, the database failed)
  2  usage error (an unknown command or option, a missing or malformed value, a number that
     is not a positive integer)
  3  trainerd is not running (for run-now, cancel, rollback, outcome, release pin)
  4  no such run, config version or release
  5  bad input: an outcome line or file the daemon refused (the message names the line)
)";

constexpr int kOk = 0;
constexpr int kError = 1;
constexpr int kUsageError = 2;
constexpr int kNotRunning = 3;
constexpr int kNoSuchThing = 4;
constexpr int kBadInput = 5;

struct Args {
  std::string config;
  std::string state_dir;
  std::string socket;
  bool json = false;
  std::string command;
  std::int64_t limit = 0;                // runs --limit; 0: the daemon's default
  std::int64_t run = 0;                  // show RUN, report RUN
  std::string output;                    // report --output FILE; empty: stdout
  std::string plan;                      // ledger --plan FILE
  std::string to;                        // rollback --to VERSION
  bool model = false;                    // rollback --model
  std::int64_t release = 0;              // rollback --model --release ID; 0: the previous one
  std::vector<std::string> worker_args;  // what-if ARGS...
  std::string action;                    // outcome add|import, release show|pin|unpin
  std::string file;                      // outcome import FILE
  daemon::OutcomeLine outcome;           // outcome add
  std::string at;                        // outcome add --at TIME
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

// The report page to --output FILE (replaced atomically) or stdout; with --json its facts.
int PrintReport(const Json& result, const Args& args) {
  if (args.json) {
    std::cout << result["report"].dump(2) << "\n";
  } else if (args.output.empty()) {
    std::cout << result["html"].get<std::string>();
  } else if (trainerd::Status s =
                 trainerd::WriteFileAtomically(args.output, result["html"].get<std::string>());
             !s.ok()) {
    return Fail(args.output + ": " + s.message(), kError);
  } else {
    std::cerr << "trainerctl: wrote " << args.output << "\n";
  }
  return kOk;
}

// The op profile stored with the run (its last "profile" event): a table, or with --json
// the summary as trainer-run --profile printed it.
int PrintProfile(const Json& result, const Args& args) {
  Json profile;
  for (const Json& e : result["events"]) {
    if (e.value("kind", "") == "profile") profile = e["details"];
  }
  if (!profile.is_object()) {
    return Fail("run " + std::to_string(args.run) +
                    " has no op profile: the first run of a new plan on the CPU is profiled",
                kNoSuchThing);
  }
  std::cout << (args.json
                    ? profile.dump(2) + "\n"
                    : trainerd::ProfileText(trainerd::Parse<trainerd::ProfileReport>(profile)));
  return kOk;
}

// Prints a control response; its error decides the exit code.
int Print(const Json& response, const Args& args) {
  if (!response.value("ok", false)) {
    const Json& error = response["error"];
    if (args.json) std::cout << response.dump() << "\n";
    const std::string code = error.value("code", "");
    if (args.command == "outcome" && code == daemon::kBadRequest) {
      return Fail(error.value("message", "error"), kBadInput);
    }
    return Fail(error.value("message", "error"), code == daemon::kNotFound ? kNoSuchThing : kError);
  }
  const Json& result = response["result"];
  if (args.command == "report") return PrintReport(result, args);
  if (args.command == "profile") return PrintProfile(result, args);
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
  } else if (args.command == "release" && args.action == "show") {
    std::cout << daemon::FormatRelease(result);
  } else if (args.command == "outcome") {
    std::cout << result.value("added", 0) << " outcomes recorded, "
              << result.value("already_stored", 0) << " already stored\n";
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
  if (!args.plan.empty()) argv.insert(argv.end(), {"--plan", args.plan});
  argv.insert(argv.end(), args.worker_args.begin(), args.worker_args.end());
  if (args.json) argv.push_back("--json");
  std::vector<char*> raw;
  for (std::string& a : argv) raw.push_back(a.data());
  raw.push_back(nullptr);
  ::execv(raw[0], raw.data());
  return Fail("cannot run " + paths.worker, kError);
}

// The control request of a daemon command, from its parsed options.
Json Request(const Args& args) {
  // profile is answered from the run's record: its stored profile event.
  Json request = {{"command", args.command == "profile" ? "show" : args.command}};
  if (args.limit > 0) request["limit"] = args.limit;
  if (args.command == "show" || args.command == "report" || args.command == "profile") {
    request["run"] = args.run;
  }
  if (!args.to.empty()) request["to"] = args.to;
  if (args.model) request["model"] = true;
  if (args.release > 0) request["release"] = args.release;
  if (args.command == "release") request["action"] = args.action;
  return request;
}

// The outcome request: the one line of `outcome add`, or the lines of FILE; nullopt after a
// message when FILE cannot be read or holds a bad line.
std::optional<Json> OutcomeRequest(const Args& args) {
  Json request = {{"command", "outcome"}, {"outcomes", Json::array()}};
  if (args.action == "add") {
    daemon::OutcomeLine line = args.outcome;
    if (!args.at.empty()) {
      line.at = daemon::ParseOutcomeTime(args.at);
      if (!line.at) {
        Fail(
            "--at: expected Unix seconds or an ISO 8601 UTC time such as 2026-12-05T10:00:00Z, "
            "got '" +
                args.at + "'",
            kUsageError);
        return std::nullopt;
      }
    }
    // Checked here as the daemon checks it: a name that is not UTF-8 cannot even be sent.
    if (trainerd::Result<daemon::OutcomeLine> checked =
            daemon::OutcomeLineFromJson(daemon::ToJson(line), "outcome add");
        !checked.ok()) {
      Fail(checked.status().message(), kBadInput);
      return std::nullopt;
    }
    request["source"] = "outcome add";
    request["outcomes"].push_back(daemon::ToJson(line));
    return request;
  }
  // Sized before it is read: a file over the request's cap could never be sent whole.
  trainerd::Result<std::string> text =
      trainerd::ReadBoundedFile(args.file, daemon::kMaxRequestBytes);
  if (!text.ok()) {
    Fail(text.status().message() +
             (text.status().code() == trainerd::Status::Code::kInvalidArgument
                  ? " (an import is one request of at most " +
                        std::to_string(daemon::kMaxRequestBytes >> 20) + " MiB: split the file)"
                  : ""),
         kBadInput);
    return std::nullopt;
  }
  trainerd::Result<std::vector<daemon::OutcomeLine>> lines =
      daemon::ParseOutcomeFile(*text, args.file);
  if (!lines.ok()) {
    Fail(lines.status().message(), kBadInput);
    return std::nullopt;
  }
  request["source"] = args.file;
  for (const daemon::OutcomeLine& line : *lines)
    request["outcomes"].push_back(daemon::ToJson(line));
  if (request.dump().size() + 1 > daemon::kMaxRequestBytes) {
    Fail(args.file + ": " + std::to_string(lines->size()) +
             " outcomes are more than one import "
             "takes (" +
             std::to_string(daemon::kMaxRequestBytes >> 20) + " MiB of requests): split the file",
         kBadInput);
    return std::nullopt;
  }
  return request;
}

// A run id, release id or count: digits only, at least 1 (CLI11's PositiveNumber accepts 2.5
// and words nothing but a range of doubles).
const CLI::Validator kPositiveInteger(
    [](std::string& value) -> std::string {
      std::int64_t n = 0;
      const char* end = value.data() + value.size();
      const std::from_chars_result parsed = std::from_chars(value.data(), end, n);
      if (parsed.ec != std::errc() || parsed.ptr != end || n < 1) {
        return "'" + value + "' is not a positive integer";
      }
      return {};
    },
    "POSITIVE-INTEGER");

// The command line, parsed by CLI11 into `args`. Returns the exit code when trainerctl is
// done already (--help, --version, a usage error), otherwise nullopt.
std::optional<int> ParseCommandLine(int argc, char** argv, Args& args) {
  CLI::App app("trainerctl");
  app.set_help_flag();  // --help prints kUsage, written for people, not CLI11's listing
  bool help = false;
  bool version = false;
  app.add_flag("-h,--help", help);
  app.add_flag("--version", version);
  app.add_option("--config", args.config);
  app.add_option("--state-dir", args.state_dir);
  app.add_option("--socket", args.socket);
  app.add_flag("--json", args.json);
  app.require_subcommand(0, 1);
  app.fallthrough();  // the options above are accepted after the command too

  app.add_subcommand("status");
  app.add_subcommand("runs")->add_option("--limit", args.limit)->check(kPositiveInteger);
  app.add_subcommand("show")
      ->add_option("RUN", args.run, "run id")
      ->required()
      ->check(kPositiveInteger);
  CLI::App* report = app.add_subcommand("report");
  report->add_option("RUN", args.run, "run id")->required()->check(kPositiveInteger);
  report->add_option("--output", args.output);
  app.add_subcommand("profile")
      ->add_option("RUN", args.run, "run id")
      ->required()
      ->check(kPositiveInteger);
  app.add_subcommand("configs");
  app.add_subcommand("ledger")->add_option("--plan", args.plan);
  app.add_subcommand("plan");
  CLI::App* what_if = app.add_subcommand("what-if");
  what_if->prefix_command()->fallthrough(false);  // its arguments are trainer-run's
  app.add_subcommand("run-now");
  app.add_subcommand("cancel");
  CLI::App* rollback = app.add_subcommand("rollback");
  CLI::Option* to = rollback->add_option("--to", args.to);
  CLI::Option* model = rollback->add_flag("--model", args.model);
  rollback->add_option("--release", args.release)->check(kPositiveInteger)->needs(model);
  to->excludes(model);
  CLI::App* outcome = app.add_subcommand("outcome");
  outcome->require_subcommand(1, 1);
  CLI::App* add = outcome->add_subcommand("add");
  add->add_option("--release", args.outcome.release)->required();
  add->add_option("--slice", args.outcome.slice)->required();
  add->add_option("--metric", args.outcome.metric)->required();
  add->add_option("--value", args.outcome.value)->required();
  add->add_option("--count", args.outcome.count)->check(kPositiveInteger);
  add->add_option("--at", args.at);
  outcome->add_subcommand("import")->add_option("FILE", args.file)->required();
  CLI::App* release = app.add_subcommand("release");
  release->require_subcommand(1, 1);
  for (const char* action : {"show", "pin", "unpin"}) {
    release->add_subcommand(action)
        ->add_option("ID", args.release, "release id")
        ->required()
        ->check(kPositiveInteger);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const std::vector<std::string> extra = app.remaining();
    const bool unknown_command = app.get_subcommands().empty() && !extra.empty() &&
                                 dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr;
    std::cerr << "trainerctl: "
              << (unknown_command ? "unknown command '" + extra.front() + "'" : e.what())
              << "\n(trainerctl --help lists the commands and options)\n";
    return kUsageError;
  }
  if (help) {
    std::cout << kUsage;
    return kOk;
  }
  if (version) {
    std::cout << "trainerctl " << trainerd::daemon::TrainerdVersion() << "\n";
    return kOk;
  }
  if (app.get_subcommands().empty()) {
    std::cerr << "trainerctl: a COMMAND is required\n\n" << kUsage;
    return kUsageError;
  }
  args.command = app.get_subcommands().front()->get_name();
  args.worker_args = what_if->remaining();
  for (const CLI::App* parent : {outcome, release}) {
    if (!parent->get_subcommands().empty())
      args.action = parent->get_subcommands().front()->get_name();
  }
  return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (std::optional<int> done = ParseCommandLine(argc, argv, args)) return *done;

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

  std::optional<Json> outcome_request;
  if (args.command == "outcome" && !(outcome_request = OutcomeRequest(args))) {
    return args.action == "add" && !args.at.empty() && !daemon::ParseOutcomeTime(args.at)
               ? kUsageError
               : kBadInput;
  }
  const Json request = outcome_request ? *outcome_request : Request(args);
  trainerd::Result<Json> response = daemon::SendControlRequest(paths.socket, request);
  if (response.ok()) return Print(*response, args);
  const bool read_only = args.command == "status" || args.command == "runs" ||
                         args.command == "show" || args.command == "report" ||
                         args.command == "profile" || args.command == "configs" ||
                         (args.command == "release" && args.action == "show");
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
