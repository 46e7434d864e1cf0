// The nightly cycle in-process with injected faults (daemon/process_launcher.h,
// daemon/file_store.h): a training worker that dies of SIGSEGV, a disk that is full when the
// model is published, a parity check that fails, an operator's cancel during the check.
// Real trainer-run workers and a real SQLite store otherwise.
#include "trainerd/daemon/nightly_cycle.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "../support/delegating_file_store.h"
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
class FullReleaseDisk final : public testing::DelegatingFileStore {
 public:
  Result<std::string> CopyVerified(const std::string& source, const std::string& destination,
                                   const std::string& expected_sha256) override {
    if (destination.find("/releases/") != std::string::npos) {
      return Status::IOError(destination + ": No space left on device");
    }
    return DelegatingFileStore::CopyVerified(source, destination, expected_sha256);
  }
};

bool IsParityLaunch(const LaunchSpec& spec) {
  return std::find(spec.argv.begin(), spec.argv.end(), "--parity") != spec.argv.end();
}

// Real processes; `on_parity` runs on the event loop once a parity check has started.
class ParityHook final : public ProcessLauncher {
 public:
  explicit ParityHook(std::function<void()> on_parity) : on_parity_(std::move(on_parity)) {}
  Result<std::unique_ptr<ChildProcess>> Launch(asio::io_context& io,
                                               const LaunchSpec& spec) override {
    Result<std::unique_ptr<ChildProcess>> child = real_.Launch(io, spec);
    if (IsParityLaunch(spec)) asio::post(io, on_parity_);
    return child;
  }

 private:
  PosixProcessLauncher real_;
  std::function<void()> on_parity_;
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
    config_.regression.beat_baseline = false;  // the tiny job cannot (tiny_job.h)
    ASSERT_TRUE(StateLayout(config_.state_dir).CreateDirectories().ok());
    Result<std::unique_ptr<store::Store>> store = store::Store::Open(config_.database_path());
    ASSERT_TRUE(store.ok()) << store.status().message();
    store_ = std::move(*store);
  }

  // A job `extra` (plan:, memory:) replacing the fixture's.
  void WriteJob(const std::string& extra) {
    testing::TinyGptYamlOptions job;
    job.extra = extra;
    dir_.Write("job.yaml", testing::TinyGptYaml(job));
  }

  // A worker that runs the real trainer-run, except that its first invocation with `mode`
  // (a flag such as --parity) in this test runs the shell command `instead`, where "$real"
  // is trainer-run and "$@" the arguments.
  void WrapTheFirst(const std::string& mode, const std::string& instead) {
    const std::string marker = dir_.File("wrapped-once");
    std::string script = "#!/bin/sh\nreal='" TRAINER_RUN_PATH "'\n";
    script += "for arg in \"$@\"; do\n";
    script += "  if [ \"$arg\" = " + mode + " ] && [ ! -e '" + marker + "' ]; then\n";
    script += "    touch '" + marker + "'\n";
    script += "    " + instead + "\n";
    script += "  fi\n";
    script += "done\n";
    script += "exec \"$real\" \"$@\"\n";
    const std::string path = dir_.Write("trainer-run-wrapper", script);
    std::filesystem::permissions(path, std::filesystem::perms::owner_all);
    config_.worker_path = path;
  }

  // The first parity check prints the real check's report with its verdict turned to a
  // failure, then exits `exit_code`.
  void FailTheFirstParityCheckWith(int exit_code) {
    WrapTheFirst("--parity", "\"$real\" \"$@\" | sed 's/\"pass\":true/\"pass\":false/'; exit " +
                                 std::to_string(exit_code));
  }

  CycleOutcome RunCycle(ProcessLauncher& launcher, FileStore& files,
                        CycleSteps steps = DefaultAttemptSteps()) {
    asio::io_context io;
    WorkerSupervisor supervisor(io, clock_, launcher, "");
    supervisor_ = &supervisor;
    Result<std::unique_ptr<store::Store>> metric_store =
        store::Store::Open(config_.database_path());
    EXPECT_TRUE(metric_store.ok()) << metric_store.status().message();
    NightlyCycle cycle(config_, *store_, **metric_store, clock_, supervisor, files, nullptr,
                       nullptr, std::move(steps));
    CycleOutcome outcome;
    const Window window = WindowStartingAt(clock_.Now(), config_.schedule);
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          outcome = co_await cycle.Run(window, "test", std::nullopt);
        },
        asio::detached);
    io.run();
    supervisor_ = nullptr;
    return outcome;
  }

  CycleOutcome RunCycle() {
    PosixProcessLauncher launcher;
    LocalFileStore files;
    return RunCycle(launcher, files);
  }

  std::vector<std::string> EventKinds(std::int64_t run) {
    std::vector<std::string> kinds;
    const Result<std::vector<store::Event>> events = store_->GetRunEvents(run);
    for (const store::Event& e : events.ok() ? *events : std::vector<store::Event>{}) {
      kinds.push_back(e.kind);
    }
    return kinds;
  }

  std::vector<store::Event> Events(std::int64_t run, const std::string& kind) {
    std::vector<store::Event> out;
    const Result<std::vector<store::Event>> events = store_->GetRunEvents(run);
    for (const store::Event& e : events.ok() ? *events : std::vector<store::Event>{}) {
      if (e.kind == kind) out.push_back(e);
    }
    return out;
  }

  // The run_started event's plan source.
  std::string PlanSource(std::int64_t run) {
    const std::vector<store::Event> started = Events(run, "run_started");
    if (started.size() != 1) return "";
    return nlohmann::json::parse(started[0].details_json).value("plan_source", "");
  }

  // Nothing of the run trained: no checkpoint event, metric, eval or throughput.
  void ExpectNotTrained(std::int64_t run) {
    EXPECT_TRUE(Events(run, "worker_checkpoint").empty());
    EXPECT_TRUE(store_->GetMetrics(run)->empty());
    EXPECT_TRUE(store_->GetSliceEvals(run)->empty());
    const store::RunRecord record = *store_->GetRun(run);
    EXPECT_FALSE(record.samples_per_second.has_value());
    EXPECT_EQ(record.throughput_method, "");
  }

  testing::TempDir dir_;
  DaemonConfig config_;
  SystemClock clock_;
  std::unique_ptr<store::Store> store_;
  WorkerSupervisor* supervisor_ = nullptr;  // the running cycle's
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

TEST_F(NightlyCycleTest, AModelThatDoesNotBeatTheSimpleBaselineIsNotReleased) {
  config_.regression.beat_baseline = true;
  config_.regression.throughput_tolerance = 0.95;  // a busy machine is no regression here
  // Night 1: the tiny job's 30 updates leave its loss above the byte frequencies'.
  const CycleOutcome small = RunCycle();
  ASSERT_EQ(small.run_ids.size(), 1u) << small.summary;
  const std::int64_t refused = small.run_ids[0];
  EXPECT_EQ(store_->GetRun(refused)->status, store::RunStatus::kRegressed);
  EXPECT_FALSE(store_->CurrentRelease()->has_value());
  const std::vector<store::Event> failed = Events(refused, "gate_failed");
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_NE(failed[0].message.find("not 1% below the simple baseline's on: "), std::string::npos)
      << failed[0].message;
  const nlohmann::json gate = nlohmann::json::parse(failed[0].details_json);
  ASSERT_EQ(gate["slices"].size(), 2u) << gate.dump();
  for (const nlohmann::json& slice : gate["slices"]) {
    ASSERT_TRUE(slice["baseline"].is_number()) << slice.dump();
    EXPECT_EQ(slice["beats_baseline"],
              slice["loss"].get<double>() < 0.99 * slice["baseline"].get<double>())
        << slice;
    EXPECT_GT(slice["standard_error"].get<double>(), 0) << slice;
  }
  // Every stored eval carries the baseline's loss, the same at every update, the
  // predictions' distribution (one count per target position of the 4 windows of 32) and
  // each window's loss, which add up to the slice's.
  const std::vector<store::SliceEval> evals = *store_->GetSliceEvals(refused);
  ASSERT_FALSE(evals.empty());
  std::map<std::string, double> baselines;
  for (const store::SliceEval& e : evals) {
    ASSERT_TRUE(e.baseline_loss.has_value()) << e.slice;
    EXPECT_EQ(baselines.try_emplace(e.slice, *e.baseline_loss).first->second, *e.baseline_loss);
    const nlohmann::json predictions = nlohmann::json::parse(e.predictions_json);
    std::int64_t positions = 0;
    for (const nlohmann::json& count : predictions["top1"]) positions += count.get<std::int64_t>();
    EXPECT_EQ(positions, 4 * 32) << e.predictions_json;
    EXPECT_EQ(predictions["classes"].size(), 256u) << "bytes: 256 classes, each counted";
    const nlohmann::json windows = nlohmann::json::parse(e.windows_json);
    EXPECT_EQ(windows["terms"], nlohmann::json({32, 32, 32, 32})) << e.windows_json;
    double sum = 0;
    for (const nlohmann::json& window : windows["sums"]) sum += window.get<double>();
    EXPECT_NEAR(sum / (4 * 32), e.loss, 1e-5 * e.loss) << e.windows_json;
  }

  // Night 2: a faster learning rate and twice the updates beat it; the model is released.
  testing::TinyGptYamlOptions job;
  job.extra = "plan: {microbatch: 8}\n";
  job.lr = 1e-2;
  job.updates = 60;
  job.eval_interval = job.checkpoint_interval = 30;
  dir_.Write("job.yaml", testing::TinyGptYaml(job));
  const CycleOutcome trained = RunCycle();
  ASSERT_EQ(trained.run_ids.size(), 1u) << trained.summary;
  EXPECT_TRUE(trained.succeeded) << trained.summary;
  const std::vector<store::Event> passed = Events(trained.run_ids[0], "gate_passed");
  ASSERT_EQ(passed.size(), 1u);
  EXPECT_NE(passed[0].message.find("beats the simple baseline"), std::string::npos)
      << passed[0].message;
  ASSERT_TRUE(store_->CurrentRelease()->has_value());
  EXPECT_EQ((*store_->CurrentRelease())->run_id, trained.run_ids[0]);
}

TEST_F(NightlyCycleTest, ANightWhoseDataShrankStopsBeforeTrainingAndTheReleaseStays) {
  config_.regression.throughput_tolerance = 0.95;  // a busy machine is no regression here
  // The job's data: two licence texts, copied where the "export" writes them each night.
  const auto export_data = [&](std::size_t keep_bytes) {
    for (const char* name : {"GPL-3", "Apache-2.0"}) {
      std::ifstream in(std::string(testing::kLicenceDir) + "/" + name, std::ios::binary);
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      dir_.Write(std::string("export/") + name, text.substr(0, keep_bytes));
    }
  };
  std::filesystem::create_directories(dir_.path() / "export");
  export_data(std::string::npos);
  testing::TinyGptYamlOptions job;
  job.extra = "plan: {microbatch: 8}\n";
  std::string yaml = testing::TinyGptYaml(job);
  const std::string licences = std::string(testing::kLicenceDir);
  for (std::size_t at; (at = yaml.find(licences)) != std::string::npos;) {
    yaml.replace(at, licences.size(), dir_.File("export"));
  }
  dir_.Write("job.yaml", yaml);

  // Night 1: no release yet, the data is checked alone, passes and trains.
  const CycleOutcome first = RunCycle();
  ASSERT_TRUE(first.succeeded) << first.summary;
  const store::RunRecord released = *store_->GetRun(first.run_ids[0]);
  const nlohmann::json alone = nlohmann::json::parse(released.data_quality_json);
  EXPECT_TRUE(alone["pass"].get<bool>()) << alone;
  EXPECT_TRUE(alone["reference_run_id"].is_null()) << alone;
  EXPECT_EQ(alone["vocabulary"], 256) << alone;
  EXPECT_TRUE(std::filesystem::exists(
      StateLayout(config_.state_dir).DataProfile(released.data_fingerprint)));

  // Night 2: the export wrote a quarter of each file. Nothing trains; the release stays.
  export_data(3000);
  const CycleOutcome second = RunCycle();
  ASSERT_EQ(second.run_ids.size(), 1u) << "no plan fixes the data: " << second.summary;
  EXPECT_FALSE(second.succeeded);
  const std::int64_t stopped = second.run_ids[0];
  const store::RunRecord run = *store_->GetRun(stopped);
  EXPECT_EQ(run.status, store::RunStatus::kDataQuality);
  EXPECT_FALSE(run.plan.has_value());
  ExpectNotTrained(stopped);
  const std::vector<std::string> kinds = EventKinds(stopped);
  EXPECT_EQ(std::count(kinds.begin(), kinds.end(), "plan"), 0);
  const std::vector<store::Event> breach = Events(stopped, "data_quality_breach");
  ASSERT_EQ(breach.size(), 1u);
  const nlohmann::json figures = nlohmann::json::parse(run.data_quality_json);
  EXPECT_EQ(figures, nlohmann::json::parse(breach[0].details_json));
  EXPECT_EQ(figures["reference_run_id"], released.id) << figures;
  EXPECT_LT(figures["size_ratio"].get<double>(), 0.5) << figures;
  EXPECT_NE(breach[0].message.find("(data_quality.min_size_ratio 50%)"), std::string::npos)
      << breach[0].message;
  EXPECT_EQ((*store_->CurrentRelease())->run_id, released.id);

  // Night 3: the export is whole again, and compared with the release's data it is the same.
  export_data(std::string::npos);
  const CycleOutcome third = RunCycle();
  ASSERT_TRUE(third.succeeded) << third.summary;
  const nlohmann::json same =
      nlohmann::json::parse(store_->GetRun(third.run_ids[0])->data_quality_json);
  EXPECT_EQ(same["id_divergence"], 0.0) << same;
  EXPECT_EQ(same["size_ratio"], 1.0) << same;
}

TEST_F(NightlyCycleTest, AWorkerKilledWhileProfilingTheDataIsACrashNotBadData) {
  config_.regression.throughput_tolerance = 0.95;  // a busy machine is no regression here
  WrapTheFirst("--data-profile", "kill -SEGV $$");
  const CycleOutcome outcome = RunCycle();
  ASSERT_EQ(outcome.run_ids.size(), 2u) << outcome.summary;
  EXPECT_EQ(store_->GetRun(outcome.run_ids[0])->status, store::RunStatus::kCrashed);
  EXPECT_EQ(Events(outcome.run_ids[0], "data_profile_failed").size(), 1u);
  EXPECT_TRUE(Events(outcome.run_ids[0], "data_unreadable").empty());
  // The fallback's attempt profiles the data again and trains.
  EXPECT_TRUE(outcome.succeeded) << outcome.summary;
  EXPECT_EQ(Events(outcome.run_ids[1], "data_quality").size(), 1u);
}

TEST_F(NightlyCycleTest, ANewPlanPassesTheParityCheckBeforeTrainingAndItsValidatedPlanIsTrusted) {
  config_.regression.throughput_tolerance = 0.95;  // a busy machine is no regression here
  config_.parity_updates = 2;                      // neither the default nor trainer-run's
  // Night 1: the job's own plan has never succeeded here, so it is checked first.
  const CycleOutcome first = RunCycle();
  ASSERT_EQ(first.run_ids.size(), 1u) << first.summary;
  ASSERT_TRUE(first.succeeded) << first.summary;
  const std::int64_t checked = first.run_ids[0];
  EXPECT_EQ(PlanSource(checked), "config");
  const std::vector<store::Event> parity = Events(checked, "parity");
  ASSERT_EQ(parity.size(), 1u);
  EXPECT_EQ(parity[0].severity, store::Severity::kInfo);
  const nlohmann::json report = nlohmann::json::parse(parity[0].details_json);
  EXPECT_EQ(report["pass"], true) << report.dump();
  ASSERT_TRUE(report["wall_seconds"].is_number()) << report.dump();
  EXPECT_GT(report["wall_seconds"].get<double>(), 0);
  // The check ran parity.updates updates (the fp32 plan: one comparison).
  ASSERT_EQ(report["comparisons"].size(), 1u) << report.dump();
  EXPECT_EQ(report["comparisons"][0]["updates"].size(), 2u) << report.dump();
  // Checked after the ledger and before training's first event.
  const std::vector<store::Event> ledger = Events(checked, "ledger");
  const std::vector<store::Event> checkpoints = Events(checked, "worker_checkpoint");
  ASSERT_EQ(ledger.size(), 1u);
  ASSERT_FALSE(checkpoints.empty());
  EXPECT_LT(ledger[0].id, parity[0].id);
  EXPECT_LT(parity[0].id, checkpoints.front().id);
  const store::RunRecord run = *store_->GetRun(checked);
  ASSERT_TRUE(run.parity_seconds.has_value());
  EXPECT_DOUBLE_EQ(*run.parity_seconds, report["wall_seconds"].get<double>());

  // Night 2: the same config version on the same machine runs its validated plan unchecked.
  const CycleOutcome second = RunCycle();
  ASSERT_EQ(second.run_ids.size(), 1u) << second.summary;
  EXPECT_TRUE(second.succeeded) << second.summary;
  const std::int64_t trusted = second.run_ids[0];
  EXPECT_EQ(PlanSource(trusted), "validated");
  EXPECT_TRUE(Events(trusted, "parity").empty());
  EXPECT_FALSE(store_->GetRun(trusted)->parity_seconds.has_value());
  EXPECT_EQ(store_->GetRun(trusted)->plan, run.plan);
}

// A plan validated under one trainer and LibTorch is checked again under another: an upgrade
// may change what the plan computes.
TEST_F(NightlyCycleTest, AValidatedPlanIsCheckedAgainAfterAnUpgradeOfLibTorch) {
  config_.regression.throughput_tolerance = 0.95;  // a busy machine is no regression here
  config_.parity_updates = 1;
  const CycleOutcome first = RunCycle();
  ASSERT_TRUE(first.succeeded) << first.summary;
  ASSERT_EQ(Events(first.run_ids[0], "parity").size(), 1u);
  const store::RunRecord validated = *store_->GetRun(first.run_ids[0]);
  EXPECT_FALSE(validated.software.trainerd_version.empty());
  EXPECT_FALSE(validated.software.libtorch_version.empty());

  // The worker now says it runs another LibTorch.
  WrapTheFirst(
      "--version",
      "\"$real\" \"$@\" | sed 's/\"torch_version\":\"[^\"]*\"/\"torch_version\":\"9.9.9\"/'; "
      "exit 0");
  const CycleOutcome upgraded = RunCycle();
  ASSERT_EQ(upgraded.run_ids.size(), 1u) << upgraded.summary;
  EXPECT_TRUE(upgraded.succeeded) << upgraded.summary;
  EXPECT_NE(PlanSource(upgraded.run_ids[0]), "validated");
  EXPECT_EQ(Events(upgraded.run_ids[0], "parity").size(), 1u) << "the plan trained unchecked";

  // Control: the same worker again, whose plan the first night validated.
  const CycleOutcome same = RunCycle();
  ASSERT_EQ(same.run_ids.size(), 1u) << same.summary;
  EXPECT_EQ(PlanSource(same.run_ids[0]), "validated");
  EXPECT_TRUE(Events(same.run_ids[0], "parity").empty());
}

TEST_F(NightlyCycleTest, APlanThatFailsTheParityCheckIsRejectedUntrainedAndTheNextRungRuns) {
  FailTheFirstParityCheckWith(7);
  const CycleOutcome outcome = RunCycle();
  ASSERT_EQ(outcome.run_ids.size(), 2u) << outcome.summary;
  const store::RunRecord rejected = *store_->GetRun(outcome.run_ids[0]);
  EXPECT_EQ(rejected.status, store::RunStatus::kRejected);
  EXPECT_EQ(PlanSource(rejected.id), "config");
  ASSERT_TRUE(rejected.plan.has_value());
  EXPECT_EQ(rejected.plan->microbatch, 8);
  EXPECT_TRUE(rejected.parity_seconds.has_value());
  ExpectNotTrained(rejected.id);
  const std::vector<store::Event> parity = Events(rejected.id, "parity");
  ASSERT_EQ(parity.size(), 1u);
  EXPECT_EQ(parity[0].severity, store::Severity::kError);
  EXPECT_NE(parity[0].message.find("failed the parity check"), std::string::npos)
      << parity[0].message;
  const nlohmann::json report = nlohmann::json::parse(parity[0].details_json);
  EXPECT_EQ(report["pass"], false) << report.dump();
  EXPECT_TRUE(report["wall_seconds"].is_number()) << report.dump();
  const std::vector<store::Event> fallback = Events(rejected.id, "fallback");
  ASSERT_EQ(fallback.size(), 1u);
  EXPECT_EQ(nlohmann::json::parse(fallback[0].details_json)["reason"], "rejected");

  // The next rung of the ladder: a re-plan, checked in its turn, trains.
  const store::RunRecord retry = *store_->GetRun(outcome.run_ids[1]);
  EXPECT_EQ(retry.fallback_of, rejected.id);
  EXPECT_EQ(PlanSource(retry.id), "replan-smaller-budget");
  EXPECT_EQ(retry.status, store::RunStatus::kSucceeded) << outcome.summary;
  ASSERT_EQ(Events(retry.id, "parity").size(), 1u);
  EXPECT_EQ(Events(retry.id, "parity")[0].severity, store::Severity::kInfo);
  EXPECT_FALSE(store_->GetMetrics(retry.id)->empty());
}

TEST_F(NightlyCycleTest, AnOomDuringTheParityCheckIsAnOomAndFallsBack) {
  FailTheFirstParityCheckWith(4);
  const CycleOutcome outcome = RunCycle();
  ASSERT_EQ(outcome.run_ids.size(), 2u) << outcome.summary;
  const store::RunRecord oom = *store_->GetRun(outcome.run_ids[0]);
  EXPECT_EQ(oom.status, store::RunStatus::kOom);
  ExpectNotTrained(oom.id);
  ASSERT_EQ(Events(oom.id, "parity").size(), 1u);
  EXPECT_NE(Events(oom.id, "parity")[0].message.find("ran out of memory"), std::string::npos);
  ASSERT_EQ(Events(oom.id, "fallback").size(), 1u);
  EXPECT_EQ(nlohmann::json::parse(Events(oom.id, "fallback")[0].details_json)["reason"], "oom");
  EXPECT_EQ(store_->GetRun(outcome.run_ids[1])->status, store::RunStatus::kSucceeded);
}

TEST_F(NightlyCycleTest, APlanWhoseLedgerExceedsTheUsableBudgetIsRejectedBeforeTraining) {
  // The ledger of microbatch 8 peaks near 2.5 MiB; a re-plan at 75% of the budget fits, and
  // the parity check's two trainers fit at a reduced batch. (With the optimizer state on the
  // host, which the planner chooses here when allowed, the check's reference runs on the
  // host and no batch is reduced.)
  WriteJob(
      "plan: {microbatch: 8}\nmemory: {budget: 2MiB, reserve: 0}\n"
      "planner: {optimizer_states: [device]}\n");
  const CycleOutcome outcome = RunCycle();
  ASSERT_GE(outcome.run_ids.size(), 2u) << outcome.summary;
  const store::RunRecord rejected = *store_->GetRun(outcome.run_ids[0]);
  EXPECT_EQ(rejected.status, store::RunStatus::kRejected);
  ASSERT_TRUE(rejected.plan.has_value());
  EXPECT_EQ(rejected.plan->microbatch, 8);
  ExpectNotTrained(rejected.id);
  const std::vector<store::Event> over = Events(rejected.id, "plan_over_budget");
  ASSERT_EQ(over.size(), 1u);
  EXPECT_EQ(over[0].severity, store::Severity::kWarning);
  const nlohmann::json details = nlohmann::json::parse(over[0].details_json);
  EXPECT_EQ(details["usable_bytes"], 2097152);
  EXPECT_GT(details["peak_bytes"].get<std::int64_t>(), 2097152);
  EXPECT_EQ(details["plan"]["microbatch"], 8);
  // Refused before the parity check too: nothing more was run for it.
  EXPECT_TRUE(Events(rejected.id, "parity").empty());
  EXPECT_FALSE(rejected.parity_seconds.has_value());
  ASSERT_EQ(Events(rejected.id, "fallback").size(), 1u);
  EXPECT_EQ(nlohmann::json::parse(Events(rejected.id, "fallback")[0].details_json)["reason"],
            "rejected");

  const store::RunRecord retry = *store_->GetRun(outcome.run_ids[1]);
  EXPECT_EQ(retry.fallback_of, rejected.id);
  EXPECT_EQ(PlanSource(retry.id), "replan-smaller-budget");
  EXPECT_NE(retry.plan, rejected.plan);
  EXPECT_TRUE(Events(retry.id, "plan_over_budget").empty());
  // Its parity check was fitted to the budget too, and the event says at which batch.
  const std::vector<store::Event> parity = Events(retry.id, "parity");
  ASSERT_EQ(parity.size(), 1u);
  const nlohmann::json checked = nlohmann::json::parse(parity[0].details_json);
  ASSERT_FALSE(checked["reduction"].empty()) << checked.dump();
  EXPECT_NE(
      parity[0].message.find("at the reduced effective batch " +
                             std::to_string(checked["checked_effective_batch"].get<int>()) + ", "),
      std::string::npos)
      << parity[0].message;
  EXPECT_EQ(retry.status, store::RunStatus::kSucceeded) << outcome.summary;
}

TEST_F(NightlyCycleTest, ALedgerThatCannotBeMeasuredRefusesNothingAndThePlanIsCheckedAndTrains) {
  // The plan is over its budget, but no ledger says so: it trains under the budget (and
  // the budget stops it), as before the check existed.
  WriteJob("plan: {microbatch: 8}\nmemory: {budget: 2MiB, reserve: 0}\n");
  WrapTheFirst("--ledger", "echo 'trainer-run: cannot measure' >&2; exit 1");
  const CycleOutcome outcome = RunCycle();
  ASSERT_FALSE(outcome.run_ids.empty()) << outcome.summary;
  const std::int64_t run = outcome.run_ids[0];
  EXPECT_EQ(Events(run, "ledger_failed").size(), 1u);
  EXPECT_TRUE(Events(run, "plan_over_budget").empty());
  ASSERT_EQ(Events(run, "parity").size(), 1u);  // the parity check still runs
  // It trained, and the budget stopped it there: a training OOM.
  EXPECT_EQ(store_->GetRun(run)->status, store::RunStatus::kOom);
  EXPECT_EQ(Events(run, "run_oom").size(), 1u);
}

TEST_F(NightlyCycleTest, AnFp16PlansOverflowSkipIsReplayedAndTheParityEventCountsIt) {
  config_.parity_updates = 2;
  WriteJob("plan: {microbatch: 4, precision: fp16}\n");
  // The check's plan overflows its first update, as a real fp16 plan does on a GPU while its
  // loss scale falls (fault injection through the real worker).
  WrapTheFirst("--parity", "exec \"$real\" \"$@\" --test-only-fault overflow_first_update");
  const CycleOutcome outcome = RunCycle();
  ASSERT_FALSE(outcome.run_ids.empty()) << outcome.summary;
  const std::vector<store::Event> parity = Events(outcome.run_ids[0], "parity");
  ASSERT_EQ(parity.size(), 1u) << outcome.summary;
  EXPECT_EQ(parity[0].severity, store::Severity::kInfo) << parity[0].message;
  EXPECT_NE(parity[0].message.find(
                "matches the reference (3 updates, 1 skipped by the fp16 loss scaler, "),
            std::string::npos)
      << parity[0].message;
  EXPECT_TRUE(outcome.succeeded) << outcome.summary;
}

TEST_F(NightlyCycleTest, WithTheParityCheckDisabledANewPlanTrainsUncheckedAndSaysSo) {
  config_.parity_updates = 0;
  const CycleOutcome outcome = RunCycle();
  ASSERT_EQ(outcome.run_ids.size(), 1u) << outcome.summary;
  EXPECT_TRUE(outcome.succeeded) << outcome.summary;
  const std::int64_t run = outcome.run_ids[0];
  EXPECT_TRUE(Events(run, "parity").empty());
  const std::vector<store::Event> disabled = Events(run, "parity_disabled");
  ASSERT_EQ(disabled.size(), 1u);
  EXPECT_EQ(disabled[0].severity, store::Severity::kInfo);
  EXPECT_FALSE(store_->GetRun(run)->parity_seconds.has_value());
}

TEST_F(NightlyCycleTest, ACancelDuringTheParityCheckCancelsTheRunAsDuringPlanning) {
  ParityHook launcher([this] { supervisor_->Stop(WorkerExit::StoppedBy::kOperator, 5); });
  LocalFileStore files;
  const CycleOutcome outcome = RunCycle(launcher, files);
  ASSERT_EQ(outcome.run_ids.size(), 1u) << outcome.summary;  // no retry after a cancel
  EXPECT_FALSE(outcome.succeeded);
  const store::RunRecord run = *store_->GetRun(outcome.run_ids[0]);
  EXPECT_EQ(run.status, store::RunStatus::kCancelled);
  ExpectNotTrained(run.id);
  const std::vector<store::Event> parity = Events(run.id, "parity");
  ASSERT_EQ(parity.size(), 1u);
  EXPECT_EQ(parity[0].severity, store::Severity::kWarning);
  EXPECT_NE(parity[0].message.find("stopped (cancelled)"), std::string::npos) << parity[0].message;
  EXPECT_TRUE(Events(run.id, "fallback").empty());
}

// A step that exists only in this test, put before training: it refuses the first attempt's
// plan (a site quota, say) and lets the next through, each time leaving an event.
class RefuseTheFirstAttempt final : public CycleStep {
 public:
  const char* name() const override { return "test_quota"; }
  asio::awaitable<void> Run(CycleState& state, CycleContext& context) override {
    const bool refuse = ++attempts_ == 1;
    context.Record(state.current.run.id, "test_quota", store::Severity::kInfo,
                   refuse ? "refused" : "allowed");
    if (refuse) state.current.end = AttemptEnd{AttemptOutcome::kRejected, "over the test quota"};
    co_return;
  }

 private:
  int attempts_ = 0;
};

TEST_F(NightlyCycleTest, AStepAddedToTheCycleRunsInEveryAttemptAndEndsOneAsAnyStepCan) {
  CycleSteps steps = DefaultAttemptSteps();
  const auto train = std::find_if(steps.begin(), steps.end(), [](const auto& step) {
    return std::string(step->name()) == "train";
  });
  ASSERT_NE(train, steps.end());
  steps.insert(train, std::make_unique<RefuseTheFirstAttempt>());
  PosixProcessLauncher launcher;
  LocalFileStore files;
  const CycleOutcome outcome = RunCycle(launcher, files, std::move(steps));
  ASSERT_EQ(outcome.run_ids.size(), 2u) << outcome.summary;
  const std::int64_t refused = outcome.run_ids[0], retried = outcome.run_ids[1];
  EXPECT_EQ(store_->GetRun(refused)->status, store::RunStatus::kRejected);
  ASSERT_EQ(Events(refused, "test_quota").size(), 1u);
  EXPECT_EQ(Events(refused, "test_quota")[0].message, "refused");
  ExpectNotTrained(refused);
  EXPECT_EQ(Events(refused, "fallback").size(), 1u);  // the fallback took it as a refused plan
  EXPECT_EQ(Events(retried, "test_quota")[0].message, "allowed");
  EXPECT_TRUE(outcome.succeeded) << outcome.summary;
  EXPECT_EQ(store_->GetRun(retried)->status, store::RunStatus::kSucceeded);
}

// A worker of another trainerd release (another worker protocol) is refused before the cycle
// records any run.
TEST_F(NightlyCycleTest, AWorkerOfAnotherProtocolVersionIsRefusedBeforeAnyRun) {
  WrapTheFirst("--version", "echo '{\"protocol_version\": 99}'; exit 0");
  const CycleOutcome outcome = RunCycle();
  EXPECT_FALSE(outcome.succeeded);
  EXPECT_TRUE(outcome.run_ids.empty());
  EXPECT_NE(outcome.summary.find("speaks worker protocol 99, this trainerd speaks " +
                                 std::to_string(kWorkerProtocolVersion)),
            std::string::npos)
      << outcome.summary;
  EXPECT_TRUE(store_->ListRecentRuns(10)->empty());
}

}  // namespace
}  // namespace trainerd::daemon
