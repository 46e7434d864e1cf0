// trainerd end to end: the real daemon executable, real trainer-run workers, a real SQLite
// file in a temporary state directory, real signals. Tiny jobs keep each cycle to seconds.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>

#include "../support/child_process.h"
#include "../support/datagram_socket.h"
#include "../support/temp_dir.h"
#include "../support/time_scale.h"
#include "../support/tiny_job.h"
#include "../support/utc_clock.h"
#include "trainerd/common/cpu_isa.h"
#include "trainerd/common/proc_file.h"
#include "trainerd/common/sha256.h"
#include "trainerd/daemon/control_client.h"
#include "trainerd/store/store.h"
#include "trainerd/trainer/spec/accumulation_steps.h"

namespace trainerd {
namespace {

using store::RunStatus;
using testing::ChildProcess;
using testing::UtcClock;

using JobOptions = testing::TinyGptYamlOptions;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

bool AnyStartsWith(const std::vector<std::string>& messages, const std::string& prefix) {
  for (const std::string& m : messages) {
    if (m.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

class DaemonTest : public ::testing::Test {
 protected:
  void WriteJob(const JobOptions& options) {
    dir_.Write("job.yaml", testing::TinyGptYaml(options));
  }

  void WriteDaemonConfig(const std::string& start = "01:30", const std::string& window = "1h",
                         const std::string& grace = "5s") {
    dir_.Write("trainerd.yaml",
               "job: job.yaml\nschedule: {start: \"" + start + "\", window: " + window +
                   ", deadline_grace: " + grace +
                   "}\nstate_dir: state\nmetrics: {listen: \"\"}\n"
                   "cost: {per_device_hour: 0.35}\n"
                   "regression: {throughput_tolerance: 95%, beat_baseline: false}\n");
  }

  std::vector<std::string> Argv(bool once) const {
    std::vector<std::string> argv = {TRAINERD_PATH, "--config", dir_.File("trainerd.yaml")};
    if (once) argv.push_back("--once");
    return argv;
  }

  // Starts the daemon (service mode) and SIGKILLs it once run 1 recorded a checkpoint at
  // `update` or later; its orphaned worker gets SIGTERM (PR_SET_PDEATHSIG), checkpoints, exits.
  void KillTheDaemonOnceRunOneCheckpointed(int update) {
    ChildProcess daemon(Argv(false));
    ASSERT_TRUE(WaitFor([update](store::Store& s) { return LastCheckpoint(s, 1) >= update; }))
        << daemon.ReadAllStderr();
    daemon.Signal(SIGKILL);
    daemon.Wait();
  }

  // Runs `trainerd --once` to its exit; returns the exit code.
  int RunOnce() {
    ChildProcess daemon(Argv(true));
    const int code = daemon.ExitCode();
    last_stderr_ = daemon.ReadAllStderr();
    return code;
  }

  std::unique_ptr<store::Store> Store() const {
    store::StoreOptions options;
    options.check_integrity_on_open = false;
    Result<std::unique_ptr<store::Store>> s =
        store::Store::OpenReadOnly(dir_.File("state/trainerd.db"), options);
    return s.ok() ? std::move(*s) : nullptr;
  }

  // Polls the store until `done` holds; false after `seconds` (times TimeScale()).
  bool WaitFor(const std::function<bool(store::Store&)>& done, double seconds = 300) const {
    const auto give_up =
        std::chrono::steady_clock::now() +
        std::chrono::milliseconds(static_cast<int>(seconds * testing::TimeScale() * 1000));
    while (std::chrono::steady_clock::now() < give_up) {
      if (std::unique_ptr<store::Store> s = Store(); s && done(*s)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

  static std::vector<store::Event> EventsOfKind(store::Store& s, std::int64_t run,
                                                const std::string& kind) {
    std::vector<store::Event> out;
    const Result<std::vector<store::Event>> events = s.GetRunEvents(run);
    for (const store::Event& e : events.ok() ? *events : std::vector<store::Event>{}) {
      if (e.kind == kind) out.push_back(e);
    }
    return out;
  }

  static std::vector<store::Event> CycleEvents(store::Store& s, const std::string& kind) {
    std::vector<store::Event> out;
    const Result<std::vector<store::Event>> events = s.ListRecentEvents(1000);
    for (const store::Event& e : events.ok() ? *events : std::vector<store::Event>{}) {
      if (e.kind == kind) out.push_back(e);
    }
    return out;
  }

  static bool HasSucceededRun(store::Store& s) {
    Result<std::vector<store::RunRecord>> runs = s.ListRunsByStatus(RunStatus::kSucceeded, 1);
    return runs.ok() && !runs->empty();
  }

  // The update of a run's last interval checkpoint, from its worker_checkpoint events.
  static int LastCheckpoint(store::Store& s, std::int64_t run) {
    int update = 0;
    for (const store::Event& e : EventsOfKind(s, run, "worker_checkpoint")) {
      update = std::max(update, nlohmann::json::parse(e.details_json).value("update", 0));
    }
    return update;
  }

  static std::int64_t FirstMetricUpdate(store::Store& s, std::int64_t run) {
    const std::vector<store::UpdateMetric> metrics = *s.GetMetrics(run);
    return metrics.empty() ? -1 : metrics.front().update;
  }

  // `job` with `updates` updates, checkpointed every 50, and the daemon's config: for the
  // tests that kill a worker mid-run.
  void WriteLongJobAndConfig(JobOptions job, int updates) {
    job.updates = updates;
    job.checkpoint_interval = 50;
    WriteJob(job);
    WriteDaemonConfig();
  }

  // Run 1 (a job of `updates`, checkpointed every 50) crashed and run 2, its retry, resumed
  // and succeeded. Updates done before the last checkpoint are not repeated. The retry may
  // resume from a later checkpoint than the store saw: the worker can write one between the
  // test's poll and its kill, before the daemon records the event. It is still one the worker
  // wrote (a multiple of the interval), and no update after it is skipped.
  static void ExpectCrashedThenResumed(store::Store& s, int updates) {
    EXPECT_EQ(s.GetRun(1)->status, RunStatus::kCrashed);
    const store::RunRecord retry = *s.GetRun(2);
    EXPECT_EQ(retry.status, RunStatus::kSucceeded);
    EXPECT_EQ(retry.fallback_of, 1);
    const std::int64_t first = FirstMetricUpdate(s, 2);
    EXPECT_GE(first, LastCheckpoint(s, 1) + 1);
    EXPECT_EQ((first - 1) % 50, 0) << first;
    EXPECT_EQ(s.GetMetrics(2)->size(), static_cast<std::size_t>(updates - first + 1));
  }

  std::string Diagnostics() const { return "trainerd stderr:\n" + last_stderr_; }

  // The running training worker's pid (state/worker.pid): trainer-run, or the launcher of a
  // data-parallel job's ranks; 0 when there is none.
  pid_t WorkerPid() const {
    std::ifstream pid_file(dir_.File("state/worker.pid"));
    pid_t worker = 0;
    pid_file >> worker;
    return worker;
  }

  testing::TempDir dir_;
  std::string last_stderr_;
};

TEST_F(DaemonTest, OnceRecordsAFullRunReleasesTheModelAndMarksTheConfigKnownGood) {
  WriteJob({});
  WriteDaemonConfig();
  ASSERT_EQ(RunOnce(), 0) << Diagnostics();
  std::unique_ptr<store::Store> s = Store();
  ASSERT_NE(s, nullptr);
  const std::vector<store::RunRecord> runs = *s->ListRecentRuns(10);
  ASSERT_EQ(runs.size(), 1u) << Diagnostics();
  const store::RunRecord& run = runs[0];
  EXPECT_EQ(run.status, RunStatus::kSucceeded);
  EXPECT_FALSE(run.fallback_of.has_value());
  ASSERT_TRUE(run.started_at && run.ended_at);
  EXPECT_LE(run.created_at, *run.started_at);
  EXPECT_LT(*run.started_at, *run.ended_at);
  EXPECT_LT(*run.ended_at, run.deadline_at);
  ASSERT_TRUE(run.plan.has_value());
  EXPECT_EQ(run.plan->accumulation_steps, AccumulationSteps(8, run.plan->microbatch));
  EXPECT_FALSE(run.hardware.cpu_model.empty());
  EXPECT_GT(run.hardware.cpu_cores, 0);
  EXPECT_GT(run.hardware.memory_bytes, 0);
  EXPECT_EQ(run.hardware.device, "cpu");
  EXPECT_EQ(run.hardware.isa, ThisCpuIsa().Description());
  EXPECT_FALSE(run.software.trainerd_version.empty());
  EXPECT_FALSE(run.software.libtorch_version.empty());
  // The BLAS by its own name; OpenBLAS also with the kernels the worker ran on.
  EXPECT_TRUE(run.software.blas.starts_with("OpenBLAS ") || run.software.blas.starts_with("Intel"))
      << run.software.blas;
  if (run.software.blas.starts_with("OpenBLAS ")) {
    EXPECT_NE(run.software.blas.find(" kernels, /"), std::string::npos) << run.software.blas;
  }
  EXPECT_FALSE(run.software.compiler.empty());
  const nlohmann::json shapes = nlohmann::json::parse(run.shapes_json);
  EXPECT_EQ(shapes["effective_batch"], 8);
  EXPECT_EQ(shapes["model"]["blocks"], 2);
  EXPECT_EQ(nlohmann::json::parse(run.seeds_json)["training"], 7);
  EXPECT_EQ(run.data_fingerprint.size(), 64u);
  EXPECT_NE(run.throughput_method.find("warm-up"), std::string::npos);
  ASSERT_TRUE(run.peak_memory.has_value());
  EXPECT_GT(run.peak_memory->parameters, 0);
  EXPECT_EQ(run.peak_memory->gradients, run.peak_memory->parameters);
  EXPECT_GT(run.peak_memory->optimizer_state, 0);
  EXPECT_GT(run.peak_memory->activations, 0);
  EXPECT_GT(run.peak_memory->inputs, 0);
  EXPECT_GT(run.peak_memory->peak, run.peak_memory->parameters);
  ASSERT_TRUE(run.samples_per_second && run.tokens_per_second && run.mfu && run.cost_per_sample &&
              run.final_loss);
  EXPECT_GT(*run.samples_per_second, 0);
  EXPECT_DOUBLE_EQ(*run.tokens_per_second, *run.samples_per_second * 32);
  EXPECT_GT(*run.mfu, 0);
  EXPECT_LE(*run.mfu, 1);
  EXPECT_GT(*run.cost_per_sample, 0);
  EXPECT_LT(*run.final_loss, 5.0);

  EXPECT_EQ(s->GetMetrics(run.id)->size(), 30u);
  EXPECT_EQ(FirstMetricUpdate(*s, run.id), 1);
  EXPECT_FALSE(s->GetSliceEvals(run.id)->empty());

  const std::optional<store::Release> release = *s->CurrentRelease();
  ASSERT_TRUE(release.has_value());
  EXPECT_EQ(release->run_id, run.id);
  EXPECT_TRUE(release->gate_passed);
  Result<std::string> sha = Sha256File(release->artifact_path);
  ASSERT_TRUE(sha.ok()) << release->artifact_path;
  EXPECT_EQ(*sha, release->artifact_hash);

  const std::optional<store::ConfigVersion> good = *s->LastKnownGoodConfig();
  ASSERT_TRUE(good.has_value());
  EXPECT_EQ(good->hash, run.config_hash);
  EXPECT_EQ(good->yaml, testing::TinyGptYaml(JobOptions{}));
  EXPECT_FALSE(EventsOfKind(*s, run.id, "gate_passed").empty());
  EXPECT_FALSE(EventsOfKind(*s, run.id, "ledger").empty());
  // The finished job's checkpoint is gone: the next night trains afresh.
  EXPECT_FALSE(std::ifstream(dir_.File("state/work/checkpoint.pt")).good());
}

// The planner times its plan alone; training then takes what it takes. The first night records
// both, and the next night the planner runs (a new config version) its duration is scaled by
// that night's ratio.
TEST_F(DaemonTest, TheNextPlansDurationIsCorrectedByWhatTheLastNightsTrainingTook) {
  WriteJob({});
  WriteDaemonConfig();
  ASSERT_EQ(RunOnce(), 0) << Diagnostics();
  JobOptions changed;
  changed.updates = 31;
  WriteJob(changed);
  ASSERT_EQ(RunOnce(), 0) << Diagnostics();

  std::unique_ptr<store::Store> s = Store();
  ASSERT_NE(s, nullptr);
  const store::RunRecord first = *s->GetRun(1);
  ASSERT_EQ(first.status, RunStatus::kSucceeded) << Diagnostics();
  ASSERT_TRUE(first.samples_per_second.has_value());
  const std::vector<store::Event> timing = EventsOfKind(*s, 1, "plan_timing");
  ASSERT_EQ(timing.size(), 1u) << Diagnostics();
  const nlohmann::json t = nlohmann::json::parse(timing[0].details_json);
  EXPECT_DOUBLE_EQ(t["trained_update_seconds"].get<double>(), 8 / *first.samples_per_second);
  const nlohmann::json first_plan =
      nlohmann::json::parse(EventsOfKind(*s, 1, "plan").at(0).details_json);
  EXPECT_DOUBLE_EQ(t["planned_update_seconds"].get<double>(),
                   first_plan["planner"]["measured_update_seconds"].get<double>());
  EXPECT_EQ(first_plan["duration_correction"]["nights"], 0);  // nothing to correct by yet

  const std::vector<store::Event> second = EventsOfKind(*s, 2, "plan");
  ASSERT_EQ(second.size(), 1u) << Diagnostics();
  const nlohmann::json plan = nlohmann::json::parse(second[0].details_json);
  ASSERT_EQ(plan["source"], "planner");
  const double ratio =
      t["trained_update_seconds"].get<double>() / t["planned_update_seconds"].get<double>();
  EXPECT_EQ(plan["duration_correction"]["nights"], 1);
  EXPECT_DOUBLE_EQ(plan["duration_correction"]["factor"].get<double>(), ratio);
  EXPECT_NEAR(plan["corrected_duration_seconds"].get<double>(),
              plan["planner"]["predicted_duration_seconds"].get<double>() * ratio, 1e-9);
  EXPECT_NE(second[0].message.find("by the last night on this hardware"), std::string::npos)
      << second[0].message;
  EXPECT_NE(ReadFile(dir_.File("state/reports/run-2.html")).find("id=\"duration-correction\""),
            std::string::npos);
}

TEST_F(DaemonTest, ACandidatePlanOverItsBudgetIsRejectedAndTheKnownGoodConfigRunsInstead) {
  WriteJob({});
  WriteDaemonConfig();
  ASSERT_EQ(RunOnce(), 0) << Diagnostics();
  // The candidate forces a plan that cannot fit its 1 MiB budget: its ledger shows it, so it
  // is refused before it trains (and would run out of memory).
  JobOptions forced;
  forced.extra = "plan: {microbatch: 8}\nmemory: {budget: 1MiB, reserve: 0}\n";
  WriteJob(forced);
  ASSERT_EQ(RunOnce(), 0) << Diagnostics();

  std::unique_ptr<store::Store> s = Store();
  ASSERT_NE(s, nullptr);
  const std::vector<store::RunRecord> runs = *s->ListRecentRuns(10);  // newest first
  ASSERT_EQ(runs.size(), 3u) << Diagnostics();
  const store::RunRecord& known_good = runs[2];
  const store::RunRecord& rejected = runs[1];
  const store::RunRecord& fallback = runs[0];
  EXPECT_EQ(rejected.status, RunStatus::kRejected);
  EXPECT_NE(rejected.config_hash, known_good.config_hash);
  EXPECT_EQ(fallback.status, RunStatus::kSucceeded);
  EXPECT_EQ(fallback.fallback_of, rejected.id);
  EXPECT_EQ(fallback.config_hash, known_good.config_hash);
  EXPECT_EQ(fallback.plan, known_good.plan);  // the last validated plan
  // The effective batch never changes (the rejected run never started training: no shapes).
  EXPECT_EQ(nlohmann::json::parse(fallback.shapes_json)["effective_batch"], 8);
  ASSERT_TRUE(fallback.plan.has_value());
  EXPECT_EQ(fallback.plan->accumulation_steps, AccumulationSteps(8, fallback.plan->microbatch));

  ASSERT_EQ(EventsOfKind(*s, rejected.id, "plan_over_budget").size(), 1u);
  EXPECT_TRUE(EventsOfKind(*s, rejected.id, "worker_error").empty());  // it never trained
  EXPECT_TRUE(s->GetMetrics(rejected.id)->empty());
  ASSERT_EQ(EventsOfKind(*s, rejected.id, "rollback").size(), 1u);
  EXPECT_EQ(
      nlohmann::json::parse(EventsOfKind(*s, rejected.id, "rollback")[0].details_json)["reason"],
      "rejected");
  ASSERT_EQ(EventsOfKind(*s, rejected.id, "fallback").size(), 1u);
  EXPECT_EQ(s->GetConfigVersion(rejected.config_hash)->state, store::ConfigState::kBad);
  EXPECT_EQ((*s->LastKnownGoodConfig())->hash, known_good.config_hash);
  EXPECT_EQ((*s->CurrentRelease())->run_id, fallback.id);

  // The next night skips the bad candidate and runs the known-good version again.
  ASSERT_EQ(RunOnce(), 0) << Diagnostics();
  s = Store();
  EXPECT_EQ((*s->ListRecentRuns(1))[0].config_hash, known_good.config_hash);
  EXPECT_EQ(CycleEvents(*s, "config_bad_skipped").size(), 1u);
}

TEST_F(DaemonTest, AnInvalidParityUpdatesIsAConfigErrorNamingFileLineKeyAndValue) {
  WriteJob({});
  dir_.Write("trainerd.yaml",
             "job: job.yaml\nstate_dir: state\nmetrics: {listen: \"\"}\nparity:\n  updates: -1\n");
  EXPECT_EQ(RunOnce(), 2) << Diagnostics();
  EXPECT_NE(last_stderr_.find(dir_.File("trainerd.yaml") +
                              ":5: parity.updates: expected an integer in [0, 1000], got '-1'"),
            std::string::npos)
      << Diagnostics();
  EXPECT_FALSE(std::filesystem::exists(dir_.File("state/trainerd.db")));  // nothing started
}

TEST_F(DaemonTest, AnInvalidJobSpecIsMarkedBadAndTheKnownGoodVersionRuns) {
  WriteJob({});
  WriteDaemonConfig();
  ASSERT_EQ(RunOnce(), 0) << Diagnostics();
  std::string invalid_yaml = testing::TinyGptYaml(JobOptions{});
  invalid_yaml.replace(invalid_yaml.find("updates: 30"), 11, "updates: many");
  dir_.Write("job.yaml", invalid_yaml);
  ASSERT_EQ(RunOnce(), 0) << Diagnostics();
  EXPECT_NE(last_stderr_.find("training.updates"), std::string::npos) << Diagnostics();
  std::unique_ptr<store::Store> s = Store();
  ASSERT_NE(s, nullptr);
  const std::vector<store::RunRecord> runs = *s->ListRecentRuns(10);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].config_hash, runs[1].config_hash);  // the known-good version again
  EXPECT_EQ(runs[0].status, RunStatus::kSucceeded);
  const std::vector<store::Event> invalid = CycleEvents(*s, "config_invalid");
  ASSERT_EQ(invalid.size(), 1u);
  const std::string bad_hash =
      nlohmann::json::parse(invalid[0].details_json)["config_hash"].get<std::string>();
  EXPECT_EQ(s->GetConfigVersion(bad_hash)->state, store::ConfigState::kBad);
  const std::vector<store::Event> rollback = CycleEvents(*s, "rollback");
  ASSERT_EQ(rollback.size(), 1u);
  EXPECT_EQ(nlohmann::json::parse(rollback[0].details_json)["reason"], "invalid_config");
}

// A Hugging Face folder whose config.json holds a value of the wrong JSON type: read at
// start-up and in the cycle, it threw out of nlohmann's value(), and the daemon stopped (or
// went on answering its socket with no cycle running). It is a config error of that version
// instead: marked bad, the known-good version runs, the daemon stays up.
TEST_F(DaemonTest, AModelFolderWithAMistypedConfigJsonIsABadConfigAndTheKnownGoodRuns) {
  WriteJob({});
  WriteDaemonConfig();
  ASSERT_EQ(RunOnce(), 0) << Diagnostics();
  std::filesystem::copy(std::string(TRAINERD_TEST_HF_MODELS) + "/qwen2", dir_.File("qwen2"),
                        std::filesystem::copy_options::recursive);
  nlohmann::json config = nlohmann::json::parse(ReadFile(dir_.File("qwen2/config.json")));
  config["hidden_act"] = nullptr;
  dir_.Write("qwen2/config.json", config.dump(2));
  std::ofstream(dir_.File("train.bin"), std::ios::binary) << std::string(4000, '\1');
  dir_.Write("job.yaml",
             "model: {kind: hf, path: qwen2, block_size: 24}\n"
             "data: {format: tokens, train: train.bin, eval: [train.bin]}\n"
             "training: {effective_batch: 8, updates: 8, seed: 5}\n");
  ASSERT_EQ(RunOnce(), 0) << Diagnostics();
  EXPECT_NE(last_stderr_.find("config.json: hidden_act: expected a string, got null"),
            std::string::npos)
      << Diagnostics();
  std::unique_ptr<store::Store> s = Store();
  const std::vector<store::RunRecord> runs = *s->ListRecentRuns(10);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].config_hash, runs[1].config_hash);
  EXPECT_EQ(runs[0].status, RunStatus::kSucceeded);
  const std::vector<store::Event> invalid = CycleEvents(*s, "config_invalid");
  ASSERT_EQ(invalid.size(), 1u);
  EXPECT_NE(invalid[0].message.find("hidden_act"), std::string::npos) << invalid[0].message;
}

TEST_F(DaemonTest, AWorkerKilledMidRunIsRetriedFromItsCheckpoint) {
  WriteLongJobAndConfig({}, 4000);
  ChildProcess daemon(Argv(true));
  ASSERT_TRUE(WaitFor([](store::Store& s) { return LastCheckpoint(s, 1) >= 100; }))
      << daemon.ReadAllStderr();
  const pid_t worker = WorkerPid();
  ASSERT_GT(worker, 0);
  std::ifstream cmdline("/proc/" + std::to_string(worker) + "/cmdline");
  const std::string args((std::istreambuf_iterator<char>(cmdline)),
                         std::istreambuf_iterator<char>());
  ASSERT_NE(args.find("--output-dir"), std::string::npos) << "not the training worker";
  ASSERT_EQ(::kill(worker, SIGKILL), 0);
  EXPECT_EQ(daemon.ExitCode(), 0) << daemon.ReadAllStderr();

  std::unique_ptr<store::Store> s = Store();
  ASSERT_NE(s, nullptr);
  ExpectCrashedThenResumed(*s, 4000);
}

TEST_F(DaemonTest, ACandidateThatDegradesEvalLossIsNotReleasedAndRollsBack) {
  WriteJob({});
  WriteDaemonConfig();
  ASSERT_EQ(RunOnce(), 0) << Diagnostics();
  JobOptions slow;
  slow.lr = 1e-6;  // barely trains: every slice's eval loss stays near ln(256)
  WriteJob(slow);
  EXPECT_EQ(RunOnce(), 3) << Diagnostics();

  std::unique_ptr<store::Store> s = Store();
  ASSERT_NE(s, nullptr);
  const store::RunRecord first = *s->GetRun(1);
  const store::RunRecord regressed = *s->GetRun(2);
  EXPECT_EQ(regressed.status, RunStatus::kRegressed);
  EXPECT_EQ((*s->CurrentRelease())->run_id, first.id);  // the old model stays current
  const std::vector<store::Release> releases = *s->ListReleases(10);
  ASSERT_EQ(releases.size(), 2u);
  EXPECT_EQ(releases[0].run_id, regressed.id);
  EXPECT_FALSE(releases[0].gate_passed);
  EXPECT_FALSE(releases[0].current);
  EXPECT_EQ(EventsOfKind(*s, regressed.id, "gate_failed").size(), 1u);
  EXPECT_EQ(s->GetConfigVersion(regressed.config_hash)->state, store::ConfigState::kBad);
  EXPECT_EQ((*s->LastKnownGoodConfig())->hash, first.config_hash);
  const std::vector<store::Event> rollback = EventsOfKind(*s, regressed.id, "rollback");
  ASSERT_EQ(rollback.size(), 1u);
  EXPECT_EQ(nlohmann::json::parse(rollback[0].details_json)["reason"], "regression");
}

TEST_F(DaemonTest, ContinuedTrainingStartsFromTheCurrentReleaseAndIsGatedAgainstItOnThisData) {
  JobOptions continued;
  continued.extra = "init_from: current_release\n";
  WriteJob(continued);
  WriteDaemonConfig();
  ASSERT_EQ(RunOnce(), 0) << Diagnostics();  // no release yet: from random weights
  ASSERT_EQ(RunOnce(), 0) << Diagnostics();  // from the first night's release

  std::unique_ptr<store::Store> s = Store();
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(EventsOfKind(*s, 1, "init_from_none").size(), 1u);
  EXPECT_TRUE(EventsOfKind(*s, 2, "init_from_none").empty());
  // The second run's eval before its first update is the first night's release on the same
  // held-out data: its final losses, slice by slice.
  const std::vector<store::SliceEval> first = *s->GetSliceEvals(1);
  const std::vector<store::SliceEval> second = *s->GetSliceEvals(2);
  std::map<std::string, double> released, initial;
  for (const store::SliceEval& e : first) {
    if (e.update == 30) released[e.slice] = e.loss;
  }
  for (const store::SliceEval& e : second) {
    if (e.update == 0) initial[e.slice] = e.loss;
  }
  ASSERT_EQ(released.size(), 2u);
  ASSERT_EQ(initial.size(), released.size());
  for (const auto& [slice, loss] : released) EXPECT_NEAR(initial[slice], loss, 1e-6) << slice;
  // Its gate compared it with that evaluation, and it became the current release.
  const std::vector<store::Event> gate = EventsOfKind(*s, 2, "gate_passed");
  ASSERT_EQ(gate.size(), 1u);
  const nlohmann::json details = nlohmann::json::parse(gate[0].details_json);
  EXPECT_TRUE(details["reference_evaluated_here"].get<bool>()) << gate[0].details_json;
  EXPECT_EQ(details["reference_run_id"], 1);
  EXPECT_NEAR(details["slices"][0]["reference"].get<double>(),
              released[details["slices"][0]["slice"].get<std::string>()], 1e-6);
  EXPECT_EQ((*s->CurrentRelease())->run_id, 2);
}

TEST_F(DaemonTest, TheDeadlineStopsTheWorkerAndTheNextCycleResumesFromItsCheckpoint) {
  // A job far longer than its 20 s window; the worker is told to stop 10 s before the end
  // (after the ledger and the worker's start-up, even on a loaded machine).
  JobOptions job;
  job.updates = 200000;
  job.checkpoint_interval = 1000000;
  job.extra = "plan: {microbatch: 8}\n";
  WriteJob(job);
  WriteDaemonConfig("01:30", "20s", "10s");
  EXPECT_EQ(RunOnce(), 3) << Diagnostics();
  std::unique_ptr<store::Store> s = Store();
  ASSERT_NE(s, nullptr);
  const store::RunRecord first = *s->GetRun(1);
  EXPECT_EQ(first.status, RunStatus::kDeadline);
  ASSERT_TRUE(first.ended_at.has_value());
  EXPECT_LT(*first.ended_at, first.deadline_at);  // stopped inside the window
  const std::vector<store::Event> checkpoints = EventsOfKind(*s, 1, "worker_checkpoint");
  ASSERT_EQ(checkpoints.size(), 1u) << Diagnostics();
  EXPECT_NE(checkpoints[0].details_json.find("\"signal\""), std::string::npos);
  const int stopped_at = LastCheckpoint(*s, 1);
  EXPECT_GT(stopped_at, 0);
  EXPECT_EQ(s->GetMetrics(1)->size(), static_cast<std::size_t>(stopped_at));

  // The next cycle continues where the first stopped.
  EXPECT_EQ(RunOnce(), 3) << Diagnostics();
  s = Store();
  EXPECT_EQ(s->GetRun(2)->status, RunStatus::kDeadline);
  EXPECT_EQ(FirstMetricUpdate(*s, 2), stopped_at + 1);
}

TEST_F(DaemonTest, CatchesUpAtStartUpInsideAnOpenWindowAndStopsOnSigterm) {
  WriteJob({});
  WriteDaemonConfig(UtcClock(-60), "1h");
  testing::DatagramSocket systemd(dir_.File("notify.sock"));
  ::setenv("NOTIFY_SOCKET", dir_.File("notify.sock").c_str(), 1);
  ::setenv("WATCHDOG_USEC", "200000", 1);
  ChildProcess daemon(Argv(false));
  ::unsetenv("NOTIFY_SOCKET");
  ::unsetenv("WATCHDOG_USEC");
  ASSERT_TRUE(WaitFor(HasSucceededRun)) << daemon.ReadAllStderr();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  daemon.Signal(SIGTERM);
  EXPECT_EQ(daemon.ExitCode(), 0);
  const std::vector<std::string> notified = systemd.Messages();
  EXPECT_TRUE(AnyStartsWith(notified, "READY=1"));
  EXPECT_TRUE(AnyStartsWith(notified, "STATUS=training run 1"));
  EXPECT_TRUE(AnyStartsWith(notified, "STATUS=idle; next cycle at "));
  EXPECT_TRUE(AnyStartsWith(notified, "WATCHDOG=1"));
  EXPECT_TRUE(AnyStartsWith(notified, "STOPPING=1"));
  std::unique_ptr<store::Store> s = Store();
  EXPECT_EQ(s->ListRecentRuns(10)->size(), 1u);  // one cycle per window
  const std::vector<store::Event> started = CycleEvents(*s, "cycle_started");
  ASSERT_EQ(started.size(), 1u);
  EXPECT_EQ(nlohmann::json::parse(started[0].details_json)["trigger"], "catch-up");
}

TEST_F(DaemonTest, SighupReloadsTheScheduleOfAnIdleDaemon) {
  WriteJob({});
  WriteDaemonConfig(UtcClock(3 * 3600), "1h");  // the next window opens in three hours
  ChildProcess daemon(Argv(false));
  ASSERT_TRUE(WaitFor([](store::Store&) { return true; }));  // the store exists: it is up
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_TRUE(Store()->ListRecentRuns(1)->empty());
  WriteDaemonConfig(UtcClock(-60), "1h");  // now inside an open window
  daemon.Signal(SIGHUP);
  EXPECT_TRUE(WaitFor(HasSucceededRun)) << daemon.ReadAllStderr();
  daemon.Signal(SIGTERM);
  EXPECT_EQ(daemon.ExitCode(), 0);
}

TEST_F(DaemonTest, ADaemonKilledMidRunResumesTheRunAfterRestart) {
  JobOptions job;
  job.updates = 1000;
  job.checkpoint_interval = 50;
  WriteJob(job);
  WriteDaemonConfig(UtcClock(-60), "1h");
  ASSERT_NO_FATAL_FAILURE(KillTheDaemonOnceRunOneCheckpointed(100));
  ChildProcess second(Argv(false));
  ASSERT_TRUE(WaitFor(HasSucceededRun)) << second.ReadAllStderr();
  second.Signal(SIGTERM);
  EXPECT_EQ(second.ExitCode(), 0);

  std::unique_ptr<store::Store> s = Store();
  const store::RunRecord interrupted = *s->GetRun(1);
  const store::RunRecord resumed = *s->GetRun(2);
  EXPECT_EQ(interrupted.status, RunStatus::kInterrupted);
  EXPECT_EQ(resumed.status, RunStatus::kSucceeded);
  EXPECT_EQ(resumed.fallback_of, 1);
  EXPECT_EQ(nlohmann::json::parse(CycleEvents(*s, "cycle_started")[0].details_json)["trigger"],
            "resume");
  // It continued from a checkpoint at least as late as the last one the first daemon saw.
  const std::int64_t first_update = FirstMetricUpdate(*s, 2);
  EXPECT_GT(first_update, LastCheckpoint(*s, 1));
  EXPECT_EQ(s->GetMetrics(2)->size(), static_cast<std::size_t>(1000 - first_update + 1));
}

TEST_F(DaemonTest, ASecondDaemonOnTheSameStateDirectoryLeavesTheLiveRunAlone) {
  JobOptions job;
  job.updates = 1000;
  job.checkpoint_interval = 50;
  WriteJob(job);
  WriteDaemonConfig(UtcClock(-60), "1h");
  ChildProcess first(Argv(false));
  ASSERT_TRUE(WaitFor([](store::Store& s) { return LastCheckpoint(s, 1) >= 50; }))
      << first.ReadAllStderr();
  const std::string worker_pid = ReadFile(dir_.File("state/worker.pid"));
  // Without the lock this one stopped the worker and marked run 1 interrupted, then found the
  // control socket taken.
  EXPECT_EQ(RunOnce(), 1);
  EXPECT_NE(last_stderr_.find("another trainerd (pid " + std::to_string(first.pid()) + ")"),
            std::string::npos)
      << last_stderr_;
  EXPECT_EQ(ReadFile(dir_.File("state/worker.pid")), worker_pid);
  EXPECT_EQ(::kill(std::stoi(worker_pid), 0), 0);
  EXPECT_EQ(Store()->GetRun(1)->status, RunStatus::kRunning);
  ASSERT_TRUE(WaitFor(HasSucceededRun)) << first.ReadAllStderr();
  first.Signal(SIGTERM);
  EXPECT_EQ(first.ExitCode(), 0);
}

// A 64-bit seed is recorded with all its digits (read as an int it wrapped to -1).
TEST_F(DaemonTest, TheRunRecordKeepsASixtyFourBitSeed) {
  std::string yaml = testing::TinyGptYaml(JobOptions{});
  yaml.replace(yaml.find("seed: 7"), 7, "seed: 18446744073709551615");
  dir_.Write("job.yaml", yaml);
  WriteDaemonConfig();
  ASSERT_EQ(RunOnce(), 0) << Diagnostics();
  const store::RunRecord run = *Store()->GetRun(1);
  EXPECT_EQ(nlohmann::json::parse(run.seeds_json)["training"].get<std::uint64_t>(),
            18446744073709551615ULL);
}

// The team's own model: a module exported by real PyTorch, planned, parity-checked (its own
// dropout switched off and said so), trained and released by `trainerd --once`, and the
// release loads in Python.
TEST_F(DaemonTest, ATorchScriptModelFromPythonIsPlannedCheckedTrainedAndReleasedLoadably) {
  const std::string examples = TRAINERD_EXAMPLES_DIR;
  ChildProcess exporter({TRAINERD_TEST_PYTHON, examples + "/export_models.py", "--out",
                         dir_.path().string(), "--block-size", "16", "--width", "32", "--updates",
                         "12"});
  exporter.ReadAllLines();
  ASSERT_EQ(exporter.ExitCode(), 0) << exporter.ReadAllStderr();
  std::filesystem::copy_file(dir_.File("lm.yaml"), dir_.File("job.yaml"));
  WriteDaemonConfig();
  ASSERT_EQ(RunOnce(), 0) << Diagnostics();

  std::unique_ptr<store::Store> s = Store();
  const store::RunRecord run = *s->GetRun(1);
  EXPECT_EQ(run.status, RunStatus::kSucceeded) << Diagnostics();
  EXPECT_EQ(nlohmann::json::parse(run.shapes_json)["model"]["kind"], "torchscript");
  // No model.flops_per_sample: counted over the module's matrix products.
  ASSERT_TRUE(run.mfu.has_value());
  EXPECT_GT(*run.mfu, 0);
  EXPECT_LE(*run.mfu, 1);
  const std::vector<store::Event> parity = EventsOfKind(*s, run.id, "parity");
  ASSERT_EQ(parity.size(), 1u);
  EXPECT_EQ(nlohmann::json::parse(parity[0].details_json)["own_dropout_switched_off"], 2);
  const std::optional<store::Release> release = *s->CurrentRelease();
  ASSERT_TRUE(release.has_value());
  // The release folder, by its stable name: the scripted module, the weights as safetensors
  // and the description with the run that made it.
  const std::string current = dir_.File("state/releases/current");
  EXPECT_EQ(std::filesystem::canonical(current),
            std::filesystem::canonical(release->artifact_path).parent_path());
  const nlohmann::json about = nlohmann::json::parse(ReadFile(current + "/model.json"));
  EXPECT_EQ(about["release"]["run_id"], run.id);
  EXPECT_EQ(about["release"]["config_hash"], run.config_hash);
  EXPECT_EQ(about["release"]["model_sha256"], release->artifact_hash);
  EXPECT_EQ(about["release"]["weights_sha256"], *Sha256File(current + "/model.safetensors"));
  EXPECT_EQ(about["model"]["kind"], "torchscript");
  for (const std::vector<std::string>& argv :
       {std::vector<std::string>{TRAINERD_TEST_PYTHON, examples + "/evaluate_release.py",
                                 release->artifact_path, "--block-size", "16"},
        std::vector<std::string>{
            "/usr/bin/env", std::string("PYTHONPATH=") + TRAINERD_TEST_PYTHONPATH,
            TRAINERD_TEST_PYTHON, examples + "/evaluate_release.py", dir_.File("lm.pt"),
            "--block-size", "16", "--weights", current + "/model.safetensors"}}) {
    ChildProcess python(argv);
    const std::vector<std::string> lines = python.ReadAllLines();
    ASSERT_EQ(python.ExitCode(), 0) << python.ReadAllStderr();
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_EQ(nlohmann::json::parse(lines[0])["shape"], nlohmann::json::array({1, 16, 256}));
  }
}

// A Hugging Face folder (made by transformers: the hf_models fixture) planned, checked,
// trained and released by `trainerd --once`: the release folder is a Hugging Face folder that
// transformers loads with no missing or unexpected weight, at float32.
TEST_F(DaemonTest, AHuggingFaceFolderIsTrainedReleasedAsAFolderTransformersLoadsAndContinued) {
  std::vector<std::uint16_t> tokens;
  for (int i = 0; i < 12000; ++i) tokens.push_back(static_cast<std::uint16_t>((i * 3) % 96));
  std::ofstream(dir_.File("train.bin"), std::ios::binary)
      .write(reinterpret_cast<const char*>(tokens.data()),
             static_cast<std::streamsize>(tokens.size() * sizeof(std::uint16_t)));
  std::ofstream(dir_.File("val.bin"), std::ios::binary)
      .write(reinterpret_cast<const char*>(tokens.data()), 2000);
  dir_.Write("job.yaml", std::string("model: {kind: hf, path: ") + TRAINERD_TEST_HF_MODELS +
                             "/qwen2, block_size: 24}\n"
                             "data: {format: tokens, train: train.bin, eval: [val.bin]}\n"
                             "optimizer: {lr: 0.01}\n"
                             "training: {effective_batch: 8, updates: 8, seed: 5, "
                             "eval_interval: 4, checkpoint_interval: 4}\n"
                             "runtime: {threads: 1}\n"
                             "init_from: current_release\n");
  WriteDaemonConfig();
  ASSERT_EQ(RunOnce(), 0) << Diagnostics();
  std::unique_ptr<store::Store> s = Store();
  const store::RunRecord run = *s->GetRun(1);
  EXPECT_EQ(run.status, RunStatus::kSucceeded) << Diagnostics();
  EXPECT_EQ(nlohmann::json::parse(run.shapes_json)["model"]["kind"], "hf");
  EXPECT_EQ(EventsOfKind(*s, run.id, "parity").size(), 1u) << Diagnostics();
  const std::string current = dir_.File("state/releases/current");
  for (const char* name : {"config.json", "generation_config.json", "model.safetensors"}) {
    EXPECT_TRUE(std::filesystem::exists(current + "/" + name)) << name;
  }
  ChildProcess python({TRAINERD_HF_PYTHON, "-c",
                       "import sys, torch, transformers\n"
                       "m, info = transformers.AutoModelForCausalLM.from_pretrained(sys.argv[1], "
                       "output_loading_info=True)\n"
                       "assert not any(info.values()), info\n"
                       "assert m.dtype == torch.float32, m.dtype\n"
                       "print(m.config.model_type)\n",
                       current});
  const std::vector<std::string> lines = python.ReadAllLines();
  ASSERT_EQ(python.ExitCode(), 0) << python.ReadAllStderr();
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.back(), "qwen2");

  // The next night continues from that release, itself a Hugging Face folder: its evaluation
  // before the first update is the release's final one, on the same held-out data.
  ASSERT_EQ(RunOnce(), 0) << Diagnostics();
  s = Store();
  EXPECT_EQ(EventsOfKind(*s, 1, "init_from_none").size(), 1u) << "the folder's own weights";
  EXPECT_TRUE(EventsOfKind(*s, 2, "init_from_none").empty()) << Diagnostics();
  const std::vector<store::SliceEval> first = *s->GetSliceEvals(1);
  const std::vector<store::SliceEval> second = *s->GetSliceEvals(2);
  std::optional<double> released, initial;
  for (const store::SliceEval& e : first) {
    if (e.update == 8) released = e.loss;
  }
  for (const store::SliceEval& e : second) {
    if (e.update == 0) initial = e.loss;
  }
  ASSERT_TRUE(released && initial) << Diagnostics();
  EXPECT_NEAR(*initial, *released, 1e-6);
}

// The last rung of the fallback ladder for the team's own model: the daemon cannot load it,
// so the named baseline checkpoints the blocks the worker's ledger counted, not none.
TEST_F(DaemonTest, TheNamedBaselineOfATorchScriptModelCheckpointsTheBlocksItsLedgerCounted) {
  ChildProcess exporter(
      {TRAINERD_TEST_PYTHON, std::string(TRAINERD_EXAMPLES_DIR) + "/export_models.py", "--out",
       dir_.path().string(), "--block-size", "16", "--width", "32", "--updates", "4"});
  exporter.ReadAllLines();
  ASSERT_EQ(exporter.ExitCode(), 0) << exporter.ReadAllStderr();
  // A budget nothing fits: the job's plan, the re-plan and the baseline are each refused by
  // their ledger before they train.
  std::string job = ReadFile(dir_.File("lm.yaml"));
  job.replace(job.find("memory: {budget: 4GiB}"), 22,
              "memory: {budget: 64KiB, reserve: 0}\nplan: {microbatch: 16}");
  dir_.Write("job.yaml", job);
  WriteDaemonConfig();
  EXPECT_EQ(RunOnce(), 3) << Diagnostics();

  std::unique_ptr<store::Store> s = Store();
  ASSERT_NE(s, nullptr);
  std::optional<store::RunRecord> baseline;
  const std::vector<store::RunRecord> runs = *s->ListRecentRuns(10);
  for (const store::RunRecord& run : runs) {
    for (const store::Event& e : EventsOfKind(*s, run.id, "run_started")) {
      if (nlohmann::json::parse(e.details_json)["plan_source"] == "named-baseline") baseline = run;
    }
  }
  ASSERT_TRUE(baseline.has_value()) << Diagnostics();
  ASSERT_TRUE(baseline->plan.has_value());
  EXPECT_EQ(baseline->plan->microbatch, 1);
  EXPECT_EQ(baseline->plan->checkpoint_blocks, (std::vector<int>{0, 1}));
  EXPECT_EQ(EventsOfKind(*s, baseline->id, "plan_over_budget").size(), 1u);
}

// A daemon killed right after its start-up recovery marked the run interrupted (and before it
// resumed it) leaves the next daemon nothing unfinished to mark: the run must still be
// resumed. Found by the random-kill test below at a 47 ms kill; made deterministic here by
// doing that recovery step from the test.
TEST_F(DaemonTest, ARunMarkedInterruptedByADaemonKilledAtStartUpIsStillResumed) {
  JobOptions job;
  job.updates = 400;
  job.checkpoint_interval = 25;
  WriteJob(job);
  WriteDaemonConfig(UtcClock(-60), "1h");
  ASSERT_NO_FATAL_FAILURE(KillTheDaemonOnceRunOneCheckpointed(50));
  {
    Result<std::unique_ptr<store::Store>> killed_at_start_up =
        store::Store::Open(dir_.File("state/trainerd.db"));
    ASSERT_TRUE(killed_at_start_up.ok()) << killed_at_start_up.status().message();
    ASSERT_EQ(*(*killed_at_start_up)
                   ->MarkUnfinishedAsInterrupted(static_cast<double>(std::time(nullptr))),
              std::vector<std::int64_t>{1});
  }
  ChildProcess next(Argv(false));
  ASSERT_TRUE(WaitFor(HasSucceededRun)) << next.ReadAllStderr();
  next.Signal(SIGTERM);
  EXPECT_EQ(next.ExitCode(), 0);

  std::unique_ptr<store::Store> s = Store();
  EXPECT_EQ(s->GetRun(2)->fallback_of, 1);
  EXPECT_EQ(nlohmann::json::parse(CycleEvents(*s, "cycle_started")[0].details_json)["trigger"],
            "resume");
  EXPECT_GT(FirstMetricUpdate(*s, 2), LastCheckpoint(*s, 1));
}

// A cgroup v2 child of this process's cgroup with the memory controller and `memory.max`
// = `limit_bytes`, removed on destruction; `skip_reason` says why the machine cannot give one
// (no cgroup v2 at /sys/fs/cgroup, the memory controller not delegated, no permission).
// A child of this process's memory cgroup with a memory limit and no swap: cgroup v2
// (memory.max) where the memory controller is delegated, else the cgroup v1 memory controller
// (memory.limit_in_bytes); skip_reason() says why neither could be made.
class MemoryLimitedCgroup {
 public:
  explicit MemoryLimitedCgroup(std::int64_t limit_bytes) {
    const std::string v2 = SelfCgroupDir();
    if (!v2.empty() && std::filesystem::exists(v2 + "/cgroup.controllers")) {
      if (testing::ReadFile(v2 + "/cgroup.controllers").find("memory") == std::string::npos) {
        skip_reason_ = "the memory controller is not delegated to " + v2;
        return;
      }
      if (!WriteControl(v2 + "/cgroup.subtree_control", "+memory") || !Create(v2)) return;
      WriteControl(path_ + "/memory.max", std::to_string(limit_bytes));
      WriteControl(path_ + "/memory.swap.max", "0");
    } else if (const std::string v1 = SelfMemoryCgroupV1Dir();
               !v1.empty() && std::filesystem::exists(v1 + "/memory.oom_control")) {
      if (!Create(v1)) return;
      WriteControl(path_ + "/memory.limit_in_bytes", std::to_string(limit_bytes));
      if (std::filesystem::exists(path_ + "/memory.memsw.limit_in_bytes")) {  // swap accounted
        WriteControl(path_ + "/memory.memsw.limit_in_bytes", std::to_string(limit_bytes));
      }
    } else {
      skip_reason_ = "no memory cgroup, v2 or v1, under /sys/fs/cgroup (this machine: " +
                     testing::ReadFile("/proc/self/cgroup") + ")";
    }
  }
  ~MemoryLimitedCgroup() {
    if (!path_.empty()) ::rmdir(path_.c_str());
  }
  const std::string& skip_reason() const { return skip_reason_; }
  const std::string& path() const { return path_; }

 private:
  bool Create(const std::string& parent) {
    path_ = parent + "/trainerd-oom-test-" + std::to_string(::getpid());
    if (::mkdir(path_.c_str(), 0755) == 0) return true;
    skip_reason_ = "cannot create " + path_ + ": " + std::strerror(errno);
    path_.clear();
    return false;
  }

  bool WriteControl(const std::string& file, const std::string& value) {
    std::ofstream out(file);
    out << value << std::flush;
    if (out) return true;
    if (skip_reason_.empty()) skip_reason_ = "cannot write '" + value + "' to " + file;
    return false;
  }

  std::string path_;
  std::string skip_reason_;
};

// The worker under a real memory limit: trainerd runs in a cgroup whose memory.max is far
// below what the job's model needs while the job's own budget would allow it, so the kernel's
// OOM killer, not LibTorch, stops the worker (SIGKILL). The daemon must classify that as an
// OOM (the cgroup's oom_kill count rose) and take the fallback ladder.
TEST_F(DaemonTest, AKernelOomKillUnderAMemoryLimitIsClassifiedOomAndFallsBack) {
  const MemoryLimitedCgroup cgroup(std::int64_t{192} << 20);
  if (!cgroup.skip_reason().empty()) GTEST_SKIP() << cgroup.skip_reason();
  // ~25M parameters: with gradients and AdamW state about 400 MB before any activation.
  dir_.Write("job.yaml",
             "model: {kind: gpt, n_layer: 8, n_head: 8, n_embd: 512, block_size: 64}\n"
             "data:\n  files: [" +
                 std::string(testing::kLicenceDir) + "/GPL-3, " + testing::kLicenceDir +
                 "/Apache-2.0]\n"
                 "training: {effective_batch: 8, updates: 20}\n"
                 "plan: {microbatch: 8}\nmemory: {budget: 16GiB}\nruntime: {threads: 1}\n");
  WriteDaemonConfig();
  std::string command = "echo $$ > " + cgroup.path() + "/cgroup.procs && exec";
  for (const std::string& arg : Argv(true)) command += " '" + arg + "'";
  ChildProcess daemon({"/bin/sh", "-c", command});
  daemon.ExitCode();
  std::unique_ptr<store::Store> s = Store();
  ASSERT_NE(s, nullptr) << daemon.ReadAllStderr();
  const Result<store::RunRecord> recorded = s->GetRun(1);
  ASSERT_TRUE(recorded.ok()) << daemon.ReadAllStderr();
  const store::RunRecord& first = *recorded;
  EXPECT_EQ(first.status, RunStatus::kOom) << daemon.ReadAllStderr();
  // The policy's answer to an OOM: the next plan down the ladder, or the end of it.
  std::vector<store::Event> fallback = EventsOfKind(*s, first.id, "fallback");
  for (const store::Event& e : EventsOfKind(*s, first.id, "fallback_exhausted")) {
    fallback.push_back(e);
  }
  ASSERT_EQ(fallback.size(), 1u);
  EXPECT_EQ(nlohmann::json::parse(fallback[0].details_json)["reason"], "oom");
}

// Crash consistency: trainerd SIGKILLed at 12 random moments of its cycles (config
// resolution, planning, the ledger, training, checkpointing), restarted each time, then left
// to finish. Every killed run is `interrupted` and resumed by the next daemon; the last run
// succeeds; training never goes back behind a checkpoint a killed run recorded; and every
// run record's plan is the plan its own `plan` event chose, or none when it was killed
// before choosing one.
TEST_F(DaemonTest, KilledAtTwelveRandomMomentsEveryRunRecordStaysTrueAndTheLastRunSucceeds) {
  constexpr int kKills = 12;
  constexpr int kUpdates = 3000;
  constexpr unsigned kSeed = 20261201;
  JobOptions job;
  job.updates = kUpdates;
  job.checkpoint_interval = 25;
  job.eval_interval = 1000;
  WriteJob(job);
  WriteDaemonConfig(UtcClock(-60), "2h");
  std::mt19937 rng(kSeed);
  std::uniform_int_distribution<int> delay_ms(20, 3000);
  std::vector<int> delays;
  for (int kill = 0; kill < kKills; ++kill) {
    ChildProcess daemon(Argv(false));
    delays.push_back(delay_ms(rng));
    std::this_thread::sleep_for(std::chrono::milliseconds(delays.back()));
    daemon.Signal(SIGKILL);
    daemon.Wait();
  }
  ChildProcess last(Argv(false));
  const std::string socket = dir_.File("state/trainerd.sock");
  // Serving its socket: past start-up (a SIGTERM earlier would meet no handler yet).
  ASSERT_TRUE(WaitFor([&](store::Store&) {
    return daemon::SendControlRequest(socket, {{"command", "status"}}, 5).ok();
  }));
  ASSERT_TRUE(WaitFor(HasSucceededRun)) << last.ReadAllStderr();
  last.Signal(SIGTERM);
  EXPECT_EQ(last.ExitCode(), 0);

  std::unique_ptr<store::Store> s = Store();
  std::vector<store::RunRecord> runs = *s->ListRecentRuns(1000);
  std::reverse(runs.begin(), runs.end());  // oldest first
  ASSERT_FALSE(runs.empty());
  std::string timeline = "seed " + std::to_string(kSeed) + "; kill delays (ms):";
  for (const int d : delays) timeline += " " + std::to_string(d);
  SCOPED_TRACE(timeline);
  int checkpoint_so_far = 0;
  int killed_before_planning = 0;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const store::RunRecord& run = runs[i];
    SCOPED_TRACE("run " + std::to_string(run.id));
    const bool is_last = i + 1 == runs.size();
    EXPECT_EQ(run.status, is_last ? RunStatus::kSucceeded : RunStatus::kInterrupted);
    EXPECT_TRUE(run.ended_at.has_value());
    if (i > 0) {
      EXPECT_EQ(run.fallback_of, runs[i - 1].id);  // each resumes the one before
    }
    const std::vector<store::Event> plans = EventsOfKind(*s, run.id, "plan");
    if (plans.empty()) {
      EXPECT_EQ(run.plan, std::nullopt);
      ++killed_before_planning;
    } else {
      const nlohmann::json details = nlohmann::json::parse(plans.back().details_json);
      const nlohmann::json chosen =
          details.contains("planner") ? details["planner"] : details["plan"];
      ASSERT_TRUE(run.plan.has_value());
      EXPECT_EQ(run.plan->microbatch, chosen["microbatch"]);
      EXPECT_EQ(run.plan->accumulation_steps, chosen["accumulation_steps"]);
      EXPECT_EQ(run.plan->checkpoint_blocks, chosen["checkpoint_blocks"].get<std::vector<int>>());
      EXPECT_EQ(ToString(run.plan->precision), chosen["precision"]);
    }
    const std::int64_t first = FirstMetricUpdate(*s, run.id);
    if (first > 0) {
      EXPECT_GT(first, checkpoint_so_far);  // resumed, never behind a checkpoint
    }
    checkpoint_so_far = std::max(checkpoint_so_far, LastCheckpoint(*s, run.id));
  }
  // The job reached its last update (in the last run, or in a killed one whose final
  // checkpoint the last run resumed at), and the last run's model is the release.
  EXPECT_EQ(checkpoint_so_far, kUpdates);
  EXPECT_EQ(s->CurrentRelease()->value().run_id, runs.back().id);
  // Every kill interrupted a run (a kill during config resolution leaves none: count >= 1).
  EXPECT_GE(runs.size(), 2u);
  std::printf(
      "%zu runs for %d kills; %d killed before a plan was chosen; last checkpoint of a "
      "killed run: update %d; the last run started at update %lld\n",
      runs.size(), kKills, killed_before_planning, checkpoint_so_far,
      static_cast<long long>(FirstMetricUpdate(*s, runs.back().id)));
}

}  // namespace
}  // namespace trainerd

namespace trainerd {
namespace {

// A data-parallel job (distributed.ranks 2) of the tiny GPT: each rank trains 4 of the 8
// samples of every update.
JobOptions TwoRankJob(const std::string& distributed = "{ranks: 2, timeout: 60s}") {
  JobOptions job;
  job.extra = "distributed: " + distributed + "\n";
  return job;
}

// The children of `pid` in the order they were started.
std::vector<pid_t> ChildrenOf(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
  std::vector<pid_t> children;
  for (pid_t child; in >> child;) children.push_back(child);
  return children;
}

TEST_F(DaemonTest, ADataParallelJobTrainsAsTwoLocalRanksAndRecordsItsWorldSize) {
  WriteJob(TwoRankJob());
  WriteDaemonConfig();
  ASSERT_EQ(RunOnce(), 0) << Diagnostics();
  std::unique_ptr<store::Store> s = Store();
  ASSERT_NE(s, nullptr);
  const store::RunRecord run = *s->GetRun(1);
  ASSERT_EQ(run.status, RunStatus::kSucceeded) << Diagnostics();
  EXPECT_EQ(run.world_size, 2);
  ASSERT_TRUE(run.plan.has_value());
  EXPECT_EQ(run.plan->accumulation_steps, AccumulationSteps(4, run.plan->microbatch))
      << "the plan is per rank";
  EXPECT_EQ(s->GetMetrics(1)->size(), 30u);
  const std::string log = ReadFile(dir_.File("state/logs/run-1.log"));
  EXPECT_NE(log.find("trainer-launch: 2 ranks of " + std::string(TRAINER_RUN_PATH)),
            std::string::npos)
      << log;
}

TEST_F(DaemonTest, AKilledRankIsACrashAndTheRetryResumesFromRankZerosCheckpoint) {
  WriteLongJobAndConfig(TwoRankJob(), 1500);
  ChildProcess daemon(Argv(true));
  ASSERT_TRUE(WaitFor([](store::Store& s) { return LastCheckpoint(s, 1) >= 100; }))
      << daemon.ReadAllStderr();
  const std::vector<pid_t> ranks = ChildrenOf(WorkerPid());
  ASSERT_EQ(ranks.size(), 2u) << "not the training launcher";
  ASSERT_EQ(::kill(ranks[1], SIGKILL), 0);
  EXPECT_EQ(daemon.ExitCode(), 0) << daemon.ReadAllStderr();

  std::unique_ptr<store::Store> s = Store();
  ASSERT_NE(s, nullptr);
  ExpectCrashedThenResumed(*s, 1500);
  EXPECT_EQ(s->GetRun(2)->world_size, 2);
  const std::vector<store::Event> failures = EventsOfKind(*s, 1, "run_crash");
  ASSERT_FALSE(failures.empty());
  EXPECT_NE(failures.front().message.find("killed by SIGKILL"), std::string::npos)
      << failures.front().message;
}

// srun and torchrun stand-ins on PATH: each writes its command line to <name>.args and starts
// the command after its own options once per rank, with the environment the real one gives.
class FakeLauncherTest : public DaemonTest {
 protected:
  void SetUp() override {
    const std::string bin = dir_.File("bin");
    std::filesystem::create_directories(bin);
    const std::string start_ranks = R"(
args_file="$(dirname "$0")/$(basename "$0").args"
printf '%s\n' "$@" > "$args_file"
while [ $# -gt 0 ]; do
  case "$1" in
    --ntasks=*|--nproc_per_node=*) n=${1#*=}; shift ;;
    --*) shift ;;
    *) break ;;
  esac
done
i=0; pids=
while [ "$i" -lt "$n" ]; do
  rank_env "$i" "$n" "$@" &
  pids="$pids $!"
  i=$((i + 1))
done
status=0
for pid in $pids; do wait "$pid" || status=$?; done
exit "$status"
)";
    WriteExecutable(bin + "/srun",
                    "#!/bin/sh\nrank_env() {\n  i=$1; n=$2; shift 2\n"
                    "  SLURM_PROCID=$i SLURM_NTASKS=$n SLURM_LOCALID=$i "
                    "SLURM_JOB_NODELIST=localhost \"$@\"\n}\n" +
                        start_ranks);
    WriteExecutable(bin + "/torchrun",
                    "#!/bin/sh\nrank_env() {\n  i=$1; n=$2; shift 2\n"
                    "  RANK=$i LOCAL_RANK=$i WORLD_SIZE=$n "
                    "MASTER_ADDR=127.0.0.1 \"$@\"\n}\n" +
                        start_ranks);
    saved_path_ = std::getenv("PATH");
    ::setenv("PATH", (bin + ":" + saved_path_).c_str(), 1);
    ::setenv("MASTER_PORT", std::to_string(29400 + ::getpid() % 500).c_str(), 1);
  }
  void TearDown() override {
    ::setenv("PATH", saved_path_.c_str(), 1);
    ::unsetenv("MASTER_PORT");
  }

  static void WriteExecutable(const std::string& path, const std::string& text) {
    std::ofstream(path) << text;
    ::chmod(path.c_str(), 0755);
  }

  // Runs the two-rank job once under `launcher` and returns the launcher's arguments.
  std::vector<std::string> RunUnder(const std::string& launcher) {
    WriteJob(TwoRankJob("{ranks: 2, launcher: " + launcher + ", timeout: 60s}"));
    WriteDaemonConfig();
    EXPECT_EQ(RunOnce(), 0) << Diagnostics();
    std::unique_ptr<store::Store> s = Store();
    EXPECT_NE(s, nullptr);
    if (s == nullptr) return {};
    const store::RunRecord run = *s->GetRun(1);
    EXPECT_EQ(run.status, RunStatus::kSucceeded) << Diagnostics();
    EXPECT_EQ(run.world_size, 2);
    std::ifstream args_file(
        dir_.File(std::string("bin/") + (launcher == "slurm" ? "srun" : "torchrun") + ".args"));
    std::vector<std::string> args;
    for (std::string line; std::getline(args_file, line);) args.push_back(line);
    return args;
  }

  std::string saved_path_;
};

TEST_F(FakeLauncherTest, SlurmRunsTheRanksThroughSrunInTheJobsAllocation) {
  const std::vector<std::string> args = RunUnder("slurm");
  ASSERT_GE(args.size(), 3u);
  EXPECT_EQ(args[0], "--kill-on-bad-exit=1");
  EXPECT_EQ(args[1], "--ntasks=2");
  EXPECT_EQ(args[2], TRAINER_RUN_PATH);
}

TEST_F(FakeLauncherTest, TorchrunRunsTheRanksWithoutPython) {
  const std::vector<std::string> args = RunUnder("torchrun");
  ASSERT_GE(args.size(), 4u);
  EXPECT_EQ(args[0], "--no_python");
  EXPECT_EQ(args[1], "--standalone");
  EXPECT_EQ(args[2], "--nproc_per_node=2");
  EXPECT_EQ(args[3], TRAINER_RUN_PATH);
}

}  // namespace
}  // namespace trainerd
