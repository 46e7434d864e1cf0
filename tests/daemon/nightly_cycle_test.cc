// The nightly cycle in-process with injected faults (daemon/process_launcher.h,
// daemon/file_store.h): a training worker that dies of SIGSEGV, a disk that is full when the
// model is published. Real trainer-run workers and a real SQLite store otherwise.
#include "trainerd/daemon/nightly_cycle.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "../support/temp_dir.h"
#include "../support/tiny_job.h"
#include "trainerd/daemon/state_layout.h"

namespace trainerd::daemon {
namespace {

bool IsTrainingLaunch(const LaunchSpec& spec) {
  return std::find(spec.argv.begin(), spec.argv.end(), "--output-dir") != spec.argv.end();
}

// Real processes, except that the first training worker is replaced by one that segfaults.
class SegfaultingFirstWorker final : public ProcessLauncher {
 public:
  Result<std::unique_ptr<ChildProcess>> Launch(asio::io_context& io,
                                               const LaunchSpec& spec) override {
    if (IsTrainingLaunch(spec) && !faulted_) {
      faulted_ = true;
      return real_.Launch(io, {{"/bin/sh", "-c", "kill -SEGV $$"}, spec.stderr_path});
    }
    return real_.Launch(io, spec);
  }

 private:
  PosixProcessLauncher real_;
  bool faulted_ = false;
};

// The local filesystem, except that writing under releases/ fails as on a full disk.
class FullReleaseDisk final : public FileStore {
 public:
  Result<std::string> Read(const std::string& path) override { return real_.Read(path); }
  Status WriteAtomically(const std::string& path, const std::string& contents) override {
    return real_.WriteAtomically(path, contents);
  }
  Result<std::string> CopyVerified(const std::string& source, const std::string& destination,
                                   const std::string& expected_sha256) override {
    if (destination.find("/releases/") != std::string::npos) {
      return Status::IOError(destination + ": No space left on device");
    }
    return real_.CopyVerified(source, destination, expected_sha256);
  }
  void Remove(const std::string& path) override { real_.Remove(path); }

 private:
  LocalFileStore real_;
};

class NightlyCycleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::TinyGptYamlOptions job;
    job.extra = "plan: {microbatch: 8}\n";
    dir_.Write("job.yaml", testing::TinyGptYaml(job));
    config_.job_path = dir_.File("job.yaml");
    config_.state_dir = dir_.File("state");
    config_.worker_path = TRAINER_RUN_PATH;
    ASSERT_TRUE(StateLayout(config_.state_dir).CreateDirectories().ok());
    Result<std::unique_ptr<store::Store>> store = store::Store::Open(config_.database_path());
    ASSERT_TRUE(store.ok()) << store.status().message();
    store_ = std::move(*store);
  }

  CycleOutcome RunCycle(ProcessLauncher& launcher, FileStore& files) {
    asio::io_context io;
    WorkerSupervisor supervisor(io, clock_, launcher, "");
    NightlyCycle cycle(config_, *store_, clock_, supervisor, files, nullptr, nullptr);
    CycleOutcome outcome;
    const Window window = WindowStartingAt(clock_.Now(), config_.schedule);
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          outcome = co_await cycle.Run(window, "test", std::nullopt);
        },
        asio::detached);
    io.run();
    return outcome;
  }

  std::vector<std::string> EventKinds(std::int64_t run) {
    std::vector<std::string> kinds;
    const Result<std::vector<store::Event>> events = store_->GetRunEvents(run);
    for (const store::Event& e : events.ok() ? *events : std::vector<store::Event>{}) {
      kinds.push_back(e.kind);
    }
    return kinds;
  }

  testing::TempDir dir_;
  DaemonConfig config_;
  SystemClock clock_;
  std::unique_ptr<store::Store> store_;
};

TEST_F(NightlyCycleTest, AWorkerThatSegfaultsIsACrashAndTheRetrySucceeds) {
  SegfaultingFirstWorker launcher;
  LocalFileStore files;
  const CycleOutcome outcome = RunCycle(launcher, files);
  ASSERT_EQ(outcome.run_ids.size(), 2u) << outcome.summary;
  EXPECT_TRUE(outcome.succeeded);
  EXPECT_TRUE(outcome.released);
  const store::RunRecord crashed = *store_->GetRun(outcome.run_ids[0]);
  EXPECT_EQ(crashed.status, store::RunStatus::kCrashed);
  const store::RunRecord retry = *store_->GetRun(outcome.run_ids[1]);
  EXPECT_EQ(retry.status, store::RunStatus::kSucceeded);
  EXPECT_EQ(retry.fallback_of, crashed.id);
  bool named_the_signal = false;
  const Result<std::vector<store::Event>> events = store_->GetRunEvents(crashed.id);
  ASSERT_TRUE(events.ok());
  for (const store::Event& e : *events) {
    if (e.kind == "run_crash") named_the_signal = e.message.find("SIGSEGV") != std::string::npos;
  }
  EXPECT_TRUE(named_the_signal);
  const std::vector<std::string> kinds = EventKinds(crashed.id);
  EXPECT_NE(std::find(kinds.begin(), kinds.end(), "fallback"), kinds.end());
}

TEST_F(NightlyCycleTest, AFullDiskAtPublishingReleasesNothingAndSaysSo) {
  PosixProcessLauncher launcher;
  FullReleaseDisk files;
  const CycleOutcome outcome = RunCycle(launcher, files);
  ASSERT_EQ(outcome.run_ids.size(), 1u) << outcome.summary;
  EXPECT_FALSE(outcome.released);
  EXPECT_FALSE(store_->CurrentRelease()->has_value());
  EXPECT_TRUE(store_->ListReleases(10)->empty());
  const std::vector<std::string> kinds = EventKinds(outcome.run_ids[0]);
  EXPECT_NE(std::find(kinds.begin(), kinds.end(), "release_failed"), kinds.end());
  // The run itself is recorded whole: its metrics and evals are there.
  EXPECT_EQ(store_->GetMetrics(outcome.run_ids[0])->size(), 30u);
  EXPECT_FALSE(store_->GetSliceEvals(outcome.run_ids[0])->empty());
}

}  // namespace
}  // namespace trainerd::daemon
