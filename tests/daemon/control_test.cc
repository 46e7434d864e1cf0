// The control socket and trainerctl against a live trainerd: every command with --json
// parsed, the database fallback when the daemon is down, bad requests, an unauthorized peer,
// and 50 concurrent clients during a run.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../support/child_process.h"
#include "../support/temp_dir.h"
#include "../support/tiny_job.h"
#include "../support/trainerctl.h"
#include "../support/utc_clock.h"
#include "trainerd/daemon/control_client.h"
#include "trainerd/daemon/control_queries.h"
#include "trainerd/store/store.h"

namespace trainerd {
namespace {

using Json = nlohmann::json;
using testing::ChildProcess;
using testing::Ctl;

class ControlTest : public ::testing::Test {
 protected:
  void SetUp() override { WriteJob(30); }

  void WriteJob(int updates) {
    testing::TinyGptYamlOptions job;
    job.updates = updates;
    job.extra = "plan: {microbatch: 8}\n";
    dir_.Write("job.yaml", testing::TinyGptYaml(job));
    // The next window is hours away: cycles start only on run-now.
    dir_.Write("trainerd.yaml",
               "job: job.yaml\nstate_dir: state\nmetrics: {listen: \"\"}\n"
               "schedule: {start: \"" +
                   testing::UtcClock(3 * 3600) +
                   "\", window: 1m, deadline_grace: 5s}\n"
                   "regression: {throughput_tolerance: 95%, beat_baseline: false}\n");
  }

  std::string Socket() const { return dir_.File("state/trainerd.sock"); }

  void StartDaemon() {
    daemon_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{TRAINERD_PATH, "--config", dir_.File("trainerd.yaml")});
    for (int i = 0; i < 100 && !daemon::SendControlRequest(Socket(), {{"command", "status"}}).ok();
         ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  void StopDaemon() {
    daemon_->Signal(SIGTERM);
    EXPECT_EQ(daemon_->ExitCode(), 0);
    daemon_.reset();
  }

  // trainerctl --config FILE ARGS...
  Ctl Run(std::vector<std::string> args) const {
    args.insert(args.begin(), {"--config", dir_.File("trainerd.yaml")});
    return RunAsGiven(args);
  }

  // trainerctl ARGS..., nothing added.
  Ctl RunAsGiven(const std::vector<std::string>& args) const {
    return testing::RunTrainerctl(args);
  }

  // Waits until `runs` runs have ended.
  bool WaitForRuns(std::size_t runs) const {
    for (int i = 0; i < 1200; ++i) {
      const Json r = Run({"runs", "--json"}).json();
      if (r.is_object() && r["runs"].size() >= runs && r["runs"][0]["ended_at"].is_number()) {
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

  // Sends raw bytes on a fresh connection; the first line back.
  std::string Raw(const std::string& bytes) const {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    Socket().copy(address.sun_path, sizeof address.sun_path - 1);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) return "";
    ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    std::string line;
    char c;
    while (::recv(fd, &c, 1, 0) == 1 && c != '\n') line += c;
    ::close(fd);
    return line;
  }

  testing::TempDir dir_;
  std::unique_ptr<ChildProcess> daemon_;
};

TEST_F(ControlTest, EveryCommandAgainstALiveDaemon) {
  StartDaemon();
  Ctl status = Run({"status", "--json"});
  ASSERT_EQ(status.code, 0) << status.err;
  EXPECT_EQ(status.json()["daemon"]["phase"], "idle");
  EXPECT_TRUE(status.json()["next_start"].is_number());
  EXPECT_TRUE(status.json()["current_release"].is_null());

  Ctl cancel = Run({"cancel"});
  EXPECT_EQ(cancel.code, 1);  // nothing to cancel
  EXPECT_NE(cancel.err.find("no run in progress"), std::string::npos) << cancel.err;

  ASSERT_EQ(Run({"run-now"}).code, 0);
  ASSERT_TRUE(WaitForRuns(1));
  status = Run({"status", "--json"});
  ASSERT_EQ(status.code, 0);
  const Json s = status.json();
  EXPECT_EQ(s["last_run"]["status"], "succeeded");
  EXPECT_EQ(s["current_release"]["run_id"], 1);
  EXPECT_EQ(s["active_config"]["state"], "known-good");
  EXPECT_EQ(s["last_known_good"]["hash"], s["active_config"]["hash"]);
  // The job's own plan was new: it passed the parity check before it trained.
  EXPECT_TRUE(s["last_run"]["parity_seconds"].is_number()) << s["last_run"].dump();
  const Ctl human = Run({"status"});
  EXPECT_NE(human.out.find("current release  1: run 1"), std::string::npos) << human.out;

  const Ctl runs = Run({"runs", "--limit", "5", "--json"});
  ASSERT_EQ(runs.code, 0);
  ASSERT_EQ(runs.json()["runs"].size(), 1u);
  EXPECT_EQ(runs.json()["runs"][0]["plan"]["microbatch"], 8);

  const Ctl show = Run({"show", "1", "--json"});
  ASSERT_EQ(show.code, 0);
  const Json run = show.json()["run"];
  EXPECT_EQ(run["id"], 1);
  EXPECT_GT(run["peak_memory_bytes"]["activations"].get<std::int64_t>(), 0);
  EXPECT_GT(run["samples_per_second"].get<double>(), 0);
  EXPECT_FALSE(run["throughput_method"].get<std::string>().empty());
  ASSERT_TRUE(run["parity_seconds"].is_number()) << run.dump();
  EXPECT_GT(run["parity_seconds"].get<double>(), 0);
  EXPECT_EQ(show.json()["updates_recorded"], 30);
  EXPECT_FALSE(show.json()["events"].empty());
  EXPECT_FALSE(show.json()["slice_evals"].empty());
  const Ctl show_human = Run({"show", "1"});
  EXPECT_NE(show_human.out.find("memory at the peak"), std::string::npos) << show_human.out;
  EXPECT_NE(show_human.out.find("MiB"), std::string::npos) << show_human.out;
  const std::size_t parity = show_human.out.find("parity check");
  ASSERT_NE(parity, std::string::npos) << show_human.out;
  const std::string parity_row =
      show_human.out.substr(parity, show_human.out.find('\n', parity) - parity);
  EXPECT_EQ(parity_row.find("not run"), std::string::npos) << parity_row;
  EXPECT_EQ(Run({"show", "42"}).code, 4);

  const Ctl configs = Run({"configs", "--json"});
  ASSERT_EQ(configs.code, 0);
  ASSERT_EQ(configs.json()["configs"].size(), 1u);
  EXPECT_EQ(configs.json()["active"]["hash"], configs.json()["configs"][0]["hash"]);

  // Only one release and one config version: nothing earlier to roll back to.
  EXPECT_EQ(Run({"rollback", "--model"}).code, 4);
  EXPECT_EQ(Run({"rollback"}).code, 4);

  // A second, different config version and run; then roll both back.
  WriteJob(40);  // trains longer: its eval losses pass the gate
  ASSERT_EQ(Run({"run-now"}).code, 0);
  ASSERT_TRUE(WaitForRuns(2));
  ASSERT_EQ(Run({"status", "--json"}).json()["current_release"]["run_id"], 2);
  // releases/current names the current release's folder, and follows a model rollback.
  const auto current_folder = [&] {
    return std::filesystem::canonical(dir_.File("state/releases/current")).filename().string();
  };
  EXPECT_TRUE(current_folder().starts_with("run-2-")) << current_folder();
  const Ctl model = Run({"rollback", "--model", "--json"});
  ASSERT_EQ(model.code, 0) << model.err;
  EXPECT_EQ(Run({"status", "--json"}).json()["current_release"]["run_id"], 1);
  EXPECT_TRUE(current_folder().starts_with("run-1-")) << current_folder();
  const std::string first_hash = runs.json()["runs"][0]["config_hash"];
  const Ctl config = Run({"rollback", "--to", first_hash.substr(0, 8), "--json"});
  ASSERT_EQ(config.code, 0) << config.err;
  EXPECT_EQ(config.json()["active_config"], first_hash);
  EXPECT_EQ(Run({"status", "--json"}).json()["active_config"]["hash"], first_hash);
  EXPECT_EQ(Run({"rollback", "--to", "ffffffff"}).code, 4);
  // Each command that steers the daemon is recorded before it acts, with who sent it.
  {
    Result<std::unique_ptr<store::Store>> store = store::Store::OpenReadOnly(
        dir_.File("state/trainerd.db"), {.check_integrity_on_open = false});
    ASSERT_TRUE(store.ok()) << store.status().message();
    int rollbacks = 0;
    const Result<std::vector<store::Event>> events = (*store)->ListRecentEvents(1000);
    ASSERT_TRUE(events.ok()) << events.status().message();
    for (const store::Event& e : *events) {
      if (e.kind != "control_request") continue;
      const nlohmann::json details = nlohmann::json::parse(e.details_json);
      EXPECT_EQ(details["uid"], ::getuid()) << e.details_json;
      rollbacks += details["command"] == "rollback";
    }
    EXPECT_EQ(rollbacks, 5) << "two refused, two done, one of an unknown version";
  }

  const Ctl ledger = Run({"ledger", "--json"});
  ASSERT_EQ(ledger.code, 0) << ledger.err;
  EXPECT_GT(ledger.json()["peak_bytes"].get<std::int64_t>(), 0);
  const Ctl plan = Run({"plan", "--json"});
  ASSERT_EQ(plan.code, 0) << plan.err;
  // The effective batch of 8 in microbatches, the last one short where the split is uneven (a
  // microbatch of 3 three times when the planner timed it fastest).
  const int microbatch = plan.json()["microbatch"].get<int>();
  ASSERT_TRUE(microbatch >= 1 && microbatch <= 8) << plan.out;
  EXPECT_EQ(plan.json()["accumulation_steps"].get<int>(), (8 + microbatch - 1) / microbatch)
      << plan.out;
  const Ctl what_if = Run({"what-if", "--static", "3.2GB", "--act-per-sample", "0.34GB", "--device",
                           "24GB", "--reserve", "10%", "--json"});
  ASSERT_EQ(what_if.code, 0) << what_if.err;
  EXPECT_EQ(what_if.json()["max_microbatch"], 54);
  StopDaemon();
}

TEST_F(ControlTest, ReadOnlyCommandsReadTheDatabaseWhenTheDaemonIsDown) {
  StartDaemon();
  ASSERT_EQ(Run({"run-now"}).code, 0);
  ASSERT_TRUE(WaitForRuns(1));
  StopDaemon();
  const Ctl status = Run({"status", "--json"});
  ASSERT_EQ(status.code, 0) << status.err;
  EXPECT_EQ(status.json()["daemon"]["running"], false);
  EXPECT_EQ(status.json()["last_run"]["id"], 1);
  EXPECT_EQ(Run({"runs", "--json"}).json()["runs"].size(), 1u);
  EXPECT_EQ(Run({"show", "1", "--json"}).json()["run"]["status"], "succeeded");
  EXPECT_EQ(Run({"show", "2"}).code, 4);
  const Ctl run_now = Run({"run-now"});
  EXPECT_EQ(run_now.code, 3);
  EXPECT_NE(run_now.err.find("not running"), std::string::npos) << run_now.err;
  EXPECT_EQ(Run({"frobnicate"}).code, 2);
  EXPECT_EQ(Run({"show"}).code, 2);
}

// An import is one transaction: a daemon SIGKILLed while it takes 20 000 outcomes has stored
// all of them or none (wherever the kill lands, before, during or after the commit). And
// release show reads the database when the daemon is down.
TEST_F(ControlTest, ADaemonKilledDuringAnOutcomeImportStoredAllOfItOrNone) {
  StartDaemon();
  ASSERT_EQ(Run({"run-now"}).code, 0);
  ASSERT_TRUE(WaitForRuns(1));
  ASSERT_EQ(Run({"status", "--json"}).json()["current_release"]["id"], 1);
  std::string lines = "release,slice,metric,value,count\n";
  constexpr int kLines = 20000;
  for (int i = 0; i < kLines; ++i) lines += "1,s" + std::to_string(i) + ",ctr,0.5,3\n";
  const std::string file = dir_.Write("outcomes.csv", lines);
  ChildProcess import(
      {TRAINERCTL_PATH, "--config", dir_.File("trainerd.yaml"), "outcome", "import", file});
  std::this_thread::sleep_for(std::chrono::milliseconds(std::random_device()() % 400));
  daemon_->Signal(SIGKILL);
  EXPECT_NE(daemon_->ExitCode(), 0);
  daemon_.reset();
  import.ExitCode();
  const Ctl shown = Run({"release", "show", "1", "--json"});
  ASSERT_EQ(shown.code, 0) << shown.err;
  const std::size_t stored = shown.json()["outcomes"].size();
  EXPECT_TRUE(stored == 0 || stored == kLines) << stored << " of " << kLines;
  EXPECT_EQ(Run({"release", "show", "2"}).code, 4);
}

TEST_F(ControlTest, OptionsGoBeforeOrAfterTheCommandAndABadValueIsAUsageError) {
  StartDaemon();
  ASSERT_EQ(Run({"run-now"}).code, 0);
  ASSERT_TRUE(WaitForRuns(1));
  const std::string config = dir_.File("trainerd.yaml");
  // After the command, and as --opt=value.
  const Ctl runs = RunAsGiven({"runs", "--json", "--limit=1", "--config=" + config});
  ASSERT_EQ(runs.code, 0) << runs.err;
  EXPECT_EQ(runs.json()["runs"].size(), 1u);
  const Ctl show = RunAsGiven({"show", "1", "--config", config, "--json"});
  ASSERT_EQ(show.code, 0) << show.err;
  EXPECT_EQ(show.json()["run"]["status"], "succeeded");
  EXPECT_EQ(RunAsGiven({"--json", "show", "--config=" + config, "1"}).json()["run"]["id"], 1);

  // Each is exit 2 with a message naming what was wrong, and sends nothing to the daemon.
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"runs", "--limit", "abc"}, "--limit"},
      {{"runs", "--limit=0"}, "--limit"},
      {{"runs", "--limit", "-3"}, "--limit"},
      {{"runs", "--limit", "2.5"}, "--limit"},
      {{"show", "x"}, "RUN"},
      {{"show", "1.5"}, "RUN"},
      {{"show", "1", "2"}, "2"},
      {{"rollback", "--release", "1"}, "--model"},
      {{"rollback", "--model", "--release", "one"}, "--release"},
      {{"rollback", "--to", "abcd", "--model"}, "--model"},
      {{"status", "--socket"}, "--socket"},
      {{"status", "--frobnicate"}, "--frobnicate"},
  };
  for (const auto& [args, named] : bad) {
    const Ctl ctl = Run(args);
    std::string line;
    for (const std::string& a : args) line += a + " ";
    EXPECT_EQ(ctl.code, 2) << line << ctl.err;
    EXPECT_NE(ctl.err.find(named), std::string::npos) << line << ctl.err;
  }
  EXPECT_EQ(Run({"runs", "--json"}).json()["runs"].size(), 1u);  // nothing changed
  StopDaemon();
}

TEST_F(ControlTest, BadRequestsGetJsonErrorsAndTheDaemonCarriesOn) {
  StartDaemon();
  Json reply = Json::parse(Raw("this is not json\n"), nullptr, false);
  EXPECT_EQ(reply["error"]["code"], "bad_request");
  reply = Json::parse(Raw("{\"command\": \"reboot\"}\n"), nullptr, false);
  EXPECT_EQ(reply["error"]["code"], "bad_request");
  reply = Json::parse(Raw("{\"command\": \"show\", \"run\": \"one\"}\n"), nullptr, false);
  EXPECT_EQ(reply["error"]["code"], "bad_request");
  // Found by review of the fuzz harness: a non-boolean threw inside the handler ("internal").
  reply = Json::parse(Raw("{\"command\": \"rollback\", \"model\": \"yes\"}\n"), nullptr, false);
  EXPECT_EQ(reply["error"]["code"], "bad_request");
  reply = Json::parse(Raw("{\"command\": \"release\", \"action\": 5, \"release\": 1}\n"), nullptr,
                      false);
  EXPECT_EQ(reply["error"]["code"], "bad_request");
  reply = Json::parse(Raw("{\"command\": \"outcome\", \"outcomes\": [{\"release\": 1}]}\n"),
                      nullptr, false);
  EXPECT_EQ(reply["error"]["code"], "bad_request");
  reply = Json::parse(Raw(std::string(daemon::kMaxRequestBytes + 10, 'x')), nullptr, false);
  EXPECT_EQ(reply["error"]["code"], "bad_request");
  EXPECT_NE(reply["error"]["message"].get<std::string>().find("longer than"), std::string::npos);
  // Two requests on one connection: two answers.
  EXPECT_NE(Raw("{\"command\": \"configs\"}\n{\"command\": \"status\"}\n").find("\"ok\":true"),
            std::string::npos);
  EXPECT_EQ(Run({"status", "--json"}).code, 0);
  StopDaemon();
}

TEST_F(ControlTest, APeerThatIsNeitherRootNorTheDaemonsUserIsRefused) {
  if (::getuid() != 0) GTEST_SKIP() << "needs root to connect as another user";
  StartDaemon();
  struct stat info {};
  ASSERT_EQ(::stat(Socket().c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0660);
  ::chmod(Socket().c_str(), 0666);  // past the file mode: the peer check must still refuse
  ::chmod(dir_.path().c_str(), 0755);
  ::chmod(dir_.File("state").c_str(), 0755);
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(pipe_fds[0]);
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(2);
    const std::string line = Raw("{\"command\": \"status\"}\n");
    [[maybe_unused]] ssize_t n = ::write(pipe_fds[1], line.data(), line.size());
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  std::string line;
  char buffer[4096];
  ssize_t n;
  while ((n = ::read(pipe_fds[0], buffer, sizeof buffer)) > 0) line.append(buffer, n);
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(Json::parse(line, nullptr, false)["error"]["code"], "unauthorized") << line;
  EXPECT_EQ(Run({"status", "--json"}).code, 0);  // root still is
  StopDaemon();
}

TEST_F(ControlTest, FiftyConcurrentClientsDuringARunAreAllAnsweredAndCancelStopsIt) {
  WriteJob(100000);
  StartDaemon();
  ASSERT_EQ(Run({"run-now"}).code, 0);
  bool training = false;
  for (int i = 0; i < 600 && !training; ++i) {
    const Json s = Run({"status", "--json"}).json();
    training = s.is_object() && s["current_run"].is_object() &&
               s["current_run"]["phase"] == "training" && s["current_run"]["update"] > 0;
    if (!training) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(training);
  std::atomic<int> answered{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < 50; ++i) {
    clients.emplace_back([&] {
      Result<Json> r = daemon::SendControlRequest(Socket(), {{"command", "status"}});
      if (r.ok() && r->value("ok", false) && (*r)["result"]["current_run"].is_object()) {
        ++answered;
      }
    });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(answered.load(), 50);

  const Ctl cancel = Run({"cancel", "--json"});
  ASSERT_EQ(cancel.code, 0) << cancel.err;
  ASSERT_TRUE(WaitForRuns(1));
  EXPECT_EQ(Run({"show", "1", "--json"}).json()["run"]["status"], "cancelled");
  StopDaemon();
}

}  // namespace
}  // namespace trainerd
