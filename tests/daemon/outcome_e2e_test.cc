// After the release, end to end: two nights make two releases, the serving side's outcomes
// for both arrive through the real trainerctl, and once the clock passes their maturity a
// regression on one slice rolls the model back. trainerd runs in-process so that the test can
// move its clock (the only fake); its workers, run store, control socket and release folders
// are real.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "../support/temp_dir.h"
#include "../support/time_scale.h"
#include "../support/tiny_job.h"
#include "../support/trainerctl.h"
#include "../support/utc_clock.h"
#include "trainerd/daemon/control_client.h"
#include "trainerd/daemon/control_queries.h"
#include "trainerd/daemon/daemon.h"

namespace trainerd::daemon {
namespace {

using Json = nlohmann::json;

constexpr double kHour = 3600;

// Real time moved on by what the test adds.
class MovedClock final : public Clock {
 public:
  double Now() const override { return real_.Now() + offset.load(); }
  std::atomic<double> offset{0};

 private:
  SystemClock real_;
};

class OutcomeE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteJob(20);
    // The next window is hours away: cycles start only on run-now. The gate lets the second
    // night's model through whatever its loss; the watch looks every second.
    config_path_ = dir_.Write(
        "trainerd.yaml",
        "job: job.yaml\nstate_dir: state\nmetrics: {listen: \"\"}\n"
        "schedule: {start: \"" +
            testing::UtcClock(3 * 3600) +
            "\", window: 10m, deadline_grace: 5s}\n"
            "regression: {throughput_tolerance: 95%, eval_loss_tolerance: 100%, beat_baseline: "
            "false}\n"
            "worker: {path: " TRAINER_RUN_PATH
            "}\n"
            "outcomes:\n"
            "  metrics:\n"
            "    - {name: ctr, better: higher, maturity: 72h, min_count: 100, tolerance: 2%}\n"
            "  check_interval: 1s\n");
    Result<DaemonConfig> config = ParseDaemonConfigFile(config_path_);
    ASSERT_TRUE(config.ok()) << config.status().message();
    daemon_ = std::make_unique<Daemon>(io_, *config, config_path_, "", clock_, Daemon::Options{});
    loop_ = std::thread([this] {
      asio::co_spawn(io_, daemon_->Main(), [this](std::exception_ptr, int code) { exit_ = code; });
      io_.run();
    });
    for (int i = 0; i < 100 && !SendControlRequest(Socket(), {{"command", "status"}}).ok(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  void TearDown() override {
    if (!loop_.joinable()) return;
    ::kill(::getpid(), SIGTERM);  // the daemon's signal set takes it: a graceful stop
    loop_.join();
    EXPECT_EQ(exit_, 0);
  }

  void WriteJob(int updates) {
    testing::TinyGptYamlOptions job;
    job.updates = updates;
    job.extra = "plan: {microbatch: 8}\n";
    dir_.Write("job.yaml", testing::TinyGptYaml(job));
  }

  std::string Socket() const { return dir_.File("state/trainerd.sock"); }

  testing::Ctl Run(std::vector<std::string> args) const {
    args.insert(args.begin(), {"--config", config_path_});
    return testing::RunTrainerctl(args);
  }

  // Runs a cycle now and waits for its release to become current; its id.
  std::int64_t NightReleased() {
    const Json before = Run({"status", "--json"}).json();
    const Json old = before.value("current_release", Json());
    EXPECT_EQ(Run({"run-now"}).code, 0);
    for (int i = 0; i < 1200 * testing::TimeScale(); ++i) {
      const Json status = Run({"status", "--json"}).json();
      const Json current = status.value("current_release", Json());
      if (current.is_object() && current != old && status["daemon"]["phase"] == "idle") {
        return current["id"];
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ADD_FAILURE() << "no new release";
    return 0;
  }

  // A JSON line of 500 outcomes of `metric` ctr.
  static std::string Line(const std::string& release, const std::string& slice,
                          const std::string& value, const std::string& at) {
    return "{\"release\": " + release + ", \"slice\": \"" + slice +
           "\", \"metric\": \"ctr\", \"value\": " + value + ", \"count\": 500, \"at\": " + at +
           "}\n";
  }

  Json Release(std::int64_t id) {
    return Run({"release", "show", std::to_string(id), "--json"}).json();
  }

  testing::TempDir dir_;
  std::string config_path_;
  MovedClock clock_;
  asio::io_context io_;
  std::unique_ptr<Daemon> daemon_;
  std::thread loop_;
  std::atomic<int> exit_{-1};
};

TEST_F(OutcomeE2eTest, TwoNightsOutcomesForBothAndARegressedSliceRollsTheModelBack) {
  const std::int64_t first = NightReleased();
  clock_.offset = 24 * kHour;
  WriteJob(30);  // the next night's job trains longer: another model
  const std::int64_t second = NightReleased();
  ASSERT_NE(first, second);
  EXPECT_EQ(Release(second)["release"]["previous_release"], first);

  // A file with one bad line stores nothing of the file.
  const double now = clock_.Now();
  const std::string at = std::to_string(now);  // microseconds: after the release went live
  const std::string bad =
      dir_.Write("bad.csv", "release,slice,metric,value,count,at\n" + std::to_string(first) +
                                ",en,ctr,0.1,500," + at + "\n99,en,ctr,0.1,500," + at + "\n");
  const testing::Ctl refused = Run({"outcome", "import", bad});
  EXPECT_EQ(refused.code, 5) << refused.err;
  EXPECT_NE(refused.err.find(bad + ":3: release 99 is unknown"), std::string::npos) << refused.err;
  EXPECT_TRUE(Release(first)["outcomes"].empty());
  const testing::Ctl early = Run({"outcome", "add", "--release", std::to_string(second), "--slice",
                                  "en", "--metric", "ctr", "--value", "0.1", "--at",
                                  std::to_string(static_cast<long long>(now - 2 * kHour))});
  EXPECT_EQ(early.code, 5);
  EXPECT_NE(early.err.find("is before release " + std::to_string(second) + " went live"),
            std::string::npos)
      << early.err;

  // The serving side names the second release by its model's hash, as model.json gives it.
  const std::string sha = Release(second)["release"]["artifact_sha256"];
  const std::string good =
      dir_.Write("outcomes.jsonl", Line(std::to_string(first), "en", "0.1", at) +
                                       Line(std::to_string(first), "de", "0.1", at) +
                                       Line("\"" + sha.substr(0, 16) + "\"", "en", "0.1", at) +
                                       Line("\"" + sha.substr(0, 16) + "\"", "de", "0.09", at));
  const testing::Ctl imported = Run({"outcome", "import", good});
  ASSERT_EQ(imported.code, 0) << imported.err;
  EXPECT_EQ(imported.out, "4 outcomes recorded, 0 already stored\n");
  EXPECT_EQ(Run({"outcome", "import", good}).out, "0 outcomes recorded, 4 already stored\n");

  // Not mature yet: the second release stays, and says what it waits for.
  std::this_thread::sleep_for(std::chrono::seconds(2));
  Json shown = Release(second);
  EXPECT_TRUE(shown["release"]["current"]);
  ASSERT_EQ(shown["verdict"]["waiting"].size(), 1u) << shown.dump();
  EXPECT_EQ(shown["verdict"]["waiting"][0].get<std::string>().rfind("ctr: live 0 h of its 72 h", 0),
            0u);
  ASSERT_EQ(shown["outcomes"].size(), 2u);
  EXPECT_EQ(shown["outcomes"][0]["count"], 500);

  clock_.offset = 24 * kHour + 73 * kHour;
  Json status;
  for (int i = 0; i < 100; ++i) {
    status = Run({"status", "--json"}).json();
    if (status["current_release"]["id"] == first) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(status["current_release"]["id"], first) << "rolled back by the outcome watch";
  shown = Release(second);
  EXPECT_FALSE(shown["release"]["current"]);
  ASSERT_TRUE(shown["release"]["withdrawn"].is_object()) << shown.dump();
  EXPECT_EQ(shown["release"]["withdrawn"]["rolled_back_to"], first);
  const std::filesystem::path link =
      std::filesystem::read_symlink(dir_.File("state/releases/current"));
  EXPECT_EQ(link.filename().string(),
            std::filesystem::path(Release(first)["release"]["artifact_path"].get<std::string>())
                .parent_path()
                .filename()
                .string());
  const testing::Ctl text = Run({"release", "show", std::to_string(second)});
  EXPECT_NE(text.out.find("withdrawn at"), std::string::npos) << text.out;
  // The run's record shows its release beside it, with the same outcomes.
  const std::string run = std::to_string(shown["release"]["run_id"].get<std::int64_t>());
  const Json run_shown = Run({"show", run, "--json"}).json();
  EXPECT_EQ(run_shown["release"]["id"], second);
  EXPECT_EQ(run_shown["outcomes"], shown["outcomes"]);
  EXPECT_NE(Run({"show", run})
                .out.find("release " + std::to_string(second) + ": model " + sha.substr(0, 12) +
                          ", not current, withdrawn"),
            std::string::npos);
}

// Each line's name is its source and line number, formed only for a line refused: an 8 MiB
// source over 150k lines asked for a terabyte. The source is bounded too.
TEST_F(OutcomeE2eTest, AnImportsSourceIsBoundedAndNamesOnlyTheLineItRefuses) {
  const Json line = {{"release", "42"}, {"slice", "en"}, {"metric", "ctr"}, {"value", 0.1}};
  Result<Json> long_source = SendControlRequest(
      Socket(), {{"command", "outcome"}, {"source", std::string(1025, 's')}, {"outcomes", {line}}});
  ASSERT_TRUE(long_source.ok()) << long_source.status().message();
  EXPECT_EQ((*long_source)["error"]["code"], kBadRequest);
  EXPECT_NE((*long_source)["error"]["message"].get<std::string>().find("at most 1024 bytes"),
            std::string::npos);
  Json numbered = line;
  numbered["line"] = 7;
  Result<Json> unknown = SendControlRequest(
      Socket(), {{"command", "outcome"}, {"source", "o.jsonl"}, {"outcomes", {numbered}}});
  ASSERT_TRUE(unknown.ok()) << unknown.status().message();
  EXPECT_EQ((*unknown)["error"]["message"], "o.jsonl:7: release 42 is unknown");
}

// trainerctl sizes an import file before it reads it, and reads no FIFO: both are refused
// with the bad-input code before any daemon is asked.
TEST(OutcomeImportFileTest, AFileOverTheRequestCapOrNotAFileIsRefusedUnread) {
  testing::TempDir dir;
  const std::string big = dir.File("big.csv");
  std::filesystem::resize_file(dir.Write("big.csv", ""), kMaxRequestBytes + 1);
  const testing::Ctl refused =
      testing::RunTrainerctl({"--socket", dir.File("none.sock"), "outcome", "import", big});
  EXPECT_EQ(refused.code, 5) << refused.err;
  EXPECT_NE(refused.err.find("split the file"), std::string::npos) << refused.err;
  const std::string fifo = dir.File("outcomes.fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const testing::Ctl blocked =
      testing::RunTrainerctl({"--socket", dir.File("none.sock"), "outcome", "import", fifo});
  EXPECT_EQ(blocked.code, 5) << blocked.err;
  EXPECT_NE(blocked.err.find("not a regular file"), std::string::npos) << blocked.err;
}

}  // namespace
}  // namespace trainerd::daemon
