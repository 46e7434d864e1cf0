#include "trainerd/store/store.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <limits>

#include "test_util.h"

namespace trainerd::store {
namespace {

using testing::FinishedRun;
using testing::IsOk;
using testing::RawDb;
using testing::ReadBytes;
using testing::SampleHardware;
using testing::SampleMetric;
using testing::SampleRun;
using testing::TempDir;

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<std::unique_ptr<Store>> opened = Store::Open(path_);
    ASSERT_TRUE(IsOk(opened));
    store_ = std::move(opened).value();
    ASSERT_TRUE(IsOk(store_->RecordConfigVersion({"cfg-a", "model: a\n", 10.0})));
    ASSERT_TRUE(IsOk(store_->RecordConfigVersion({"cfg-b", "model: b\n", 20.0})));
  }

  std::int64_t CreateRun(const RunRecord& run) {
    Result<std::int64_t> id = store_->CreateRun(run);
    EXPECT_TRUE(IsOk(id));
    return id.ok() ? *id : 0;
  }

  // Records `run` as started and finished with `status`; returns its id.
  std::int64_t FinishedRunId(RunRecord run, RunStatus status) {
    const std::int64_t id = CreateRun(run);
    EXPECT_TRUE(IsOk(store_->MarkRunStarted(id, run.created_at + 1)));
    run = FinishedRun(std::move(run), status);
    run.id = id;
    EXPECT_TRUE(IsOk(store_->FinishRun(run, {}, {}, {})));
    return id;
  }

  TempDir dir_;
  std::string path_ = dir_.File("runs.db");
  std::unique_ptr<Store> store_;
};

// --- Opening ---------------------------------------------------------------------------

TEST_F(StoreTest, NewFileIsAWalTrainerdDatabaseAtTheCurrentSchema) {
  RawDb raw(path_);
  EXPECT_EQ(raw.Query("PRAGMA journal_mode"), "wal");
  EXPECT_EQ(raw.Query("PRAGMA user_version"), std::to_string(kSchemaVersion));
  EXPECT_EQ(raw.Query("PRAGMA application_id"), std::to_string(0x54524E44));
}

TEST_F(StoreTest, ReopenedStoreKeepsWhatWasWritten) {
  const std::int64_t id = CreateRun(SampleRun("cfg-a"));
  store_.reset();
  Result<std::unique_ptr<Store>> reopened = Store::Open(path_);
  ASSERT_TRUE(IsOk(reopened));
  Result<RunRecord> run = (*reopened)->GetRun(id);
  ASSERT_TRUE(IsOk(run));
  EXPECT_EQ(run->config_hash, "cfg-a");
}

TEST(StoreOpenTest, MissingDirectoryIsNotFoundNamingThePath) {
  TempDir dir;
  const std::string path = dir.File("no/such/dir/runs.db");
  Result<std::unique_ptr<Store>> store = Store::Open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), Status::Code::kNotFound);
  EXPECT_NE(store.status().message().find(path), std::string::npos) << store.status().message();
  EXPECT_FALSE(std::filesystem::exists(dir.File("no")));
}

TEST(StoreOpenTest, ReadOnlyOpenOfAMissingFileIsNotFoundAndCreatesNothing) {
  TempDir dir;
  const std::string path = dir.File("runs.db");
  Result<std::unique_ptr<Store>> store = Store::OpenReadOnly(path);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), Status::Code::kNotFound);
  EXPECT_NE(store.status().message().find(path), std::string::npos);
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

// Makes a file unwritable for this process until destroyed: permission bits suffice for
// other users; root ignores them, so for root the file is made immutable (needs
// CAP_LINUX_IMMUTABLE and a file system with the attribute, such as ext4).
class UnwritableFile {
 public:
  explicit UnwritableFile(std::string path) : path_(std::move(path)) {
    chmod(path_.c_str(), 0444);
    if (!Writable()) return;
    SetImmutable(true);
  }
  ~UnwritableFile() {
    SetImmutable(false);
    chmod(path_.c_str(), 0644);
  }
  UnwritableFile(const UnwritableFile&) = delete;
  UnwritableFile& operator=(const UnwritableFile&) = delete;

  bool Writable() const {
    const int fd = open(path_.c_str(), O_RDWR);
    if (fd >= 0) close(fd);
    return fd >= 0;
  }

 private:
  void SetImmutable(bool immutable) {
    const int fd = open(path_.c_str(), O_RDONLY);
    if (fd < 0) return;
    int flags = 0;
    if (ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0) {
      flags = immutable ? flags | FS_IMMUTABLE_FL : flags & ~FS_IMMUTABLE_FL;
      ioctl(fd, FS_IOC_SETFLAGS, &flags);
    }
    close(fd);
  }

  std::string path_;
};

TEST(StoreOpenTest, UnwritableFileIsAnIOErrorAndStaysUnchanged) {
  TempDir dir;
  const std::string path = dir.File("runs.db");
  ASSERT_TRUE(IsOk(Store::Open(path)));
  const std::string before = ReadBytes(path);
  UnwritableFile unwritable(path);
  if (unwritable.Writable()) {
    GTEST_SKIP() << "cannot make a file unwritable here (root without CAP_LINUX_IMMUTABLE?)";
  }
  Result<std::unique_ptr<Store>> store = Store::Open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), Status::Code::kIOError);
  EXPECT_NE(store.status().message().find(path), std::string::npos) << store.status().message();
  EXPECT_EQ(ReadBytes(path), before);
  // Readers need no write access.
  EXPECT_TRUE(IsOk(Store::OpenReadOnly(path)));
}

TEST_F(StoreTest, ReadOnlyStoreReadsWhatTheWriterCommitsAndRefusesWrites) {
  Result<std::unique_ptr<Store>> reader = Store::OpenReadOnly(path_);
  ASSERT_TRUE(IsOk(reader));
  const std::int64_t id = CreateRun(SampleRun("cfg-a"));
  Result<RunRecord> seen = (*reader)->GetRun(id);
  ASSERT_TRUE(IsOk(seen));
  EXPECT_EQ(seen->config_hash, "cfg-a");

  const std::string before = ReadBytes(path_);
  Result<std::int64_t> created = (*reader)->CreateRun(SampleRun("cfg-a"));
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.status().code(), Status::Code::kFailedPrecondition);
  Status appended = (*reader)->AppendMetrics(id, {SampleMetric(0)});
  EXPECT_EQ(appended.code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(ReadBytes(path_), before);
  Result<std::vector<UpdateMetric>> metrics = store_->GetMetrics(id);
  ASSERT_TRUE(IsOk(metrics));
  EXPECT_TRUE(metrics->empty());
}

// --- Config versions -------------------------------------------------------------------

TEST_F(StoreTest, ConfigVersionRoundTripsAndStartsAsCandidate) {
  Result<ConfigVersion> recorded =
      store_->RecordConfigVersion({"cfg-c", "model: c\nupdates: 3\n", 30.5, ConfigState::kBad});
  ASSERT_TRUE(IsOk(recorded));
  EXPECT_EQ(recorded->state, ConfigState::kCandidate);
  Result<ConfigVersion> stored = store_->GetConfigVersion("cfg-c");
  ASSERT_TRUE(IsOk(stored));
  EXPECT_EQ(stored->hash, "cfg-c");
  EXPECT_EQ(stored->yaml, "model: c\nupdates: 3\n");
  EXPECT_EQ(stored->first_seen, 30.5);
  EXPECT_EQ(stored->state, ConfigState::kCandidate);

  Result<std::vector<ConfigVersion>> all = store_->ListConfigVersions();
  ASSERT_TRUE(IsOk(all));
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].hash, "cfg-c");  // most recently first seen first
  EXPECT_EQ((*all)[2].hash, "cfg-a");

  EXPECT_EQ(store_->GetConfigVersion("nope").status().code(), Status::Code::kNotFound);
}

TEST_F(StoreTest, RecordingAKnownConfigKeepsItsStateAndRejectsOtherText) {
  ASSERT_TRUE(IsOk(store_->SetConfigState({"cfg-a", ConfigState::kKnownGood, "ok", 11.0})));
  Result<ConfigVersion> again = store_->RecordConfigVersion({"cfg-a", "model: a\n", 99.0});
  ASSERT_TRUE(IsOk(again));
  EXPECT_EQ(again->state, ConfigState::kKnownGood);
  EXPECT_EQ(again->first_seen, 10.0);

  Result<ConfigVersion> clash = store_->RecordConfigVersion({"cfg-a", "model: z\n", 99.0});
  ASSERT_FALSE(clash.ok());
  EXPECT_EQ(clash.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(store_->GetConfigVersion("cfg-a")->yaml, "model: a\n");
}

TEST_F(StoreTest, ConfigStateChangesAreKeptWithTheirReasons) {
  const std::int64_t run = CreateRun(SampleRun("cfg-a"));
  ASSERT_TRUE(IsOk(store_->SetConfigState(
      {"cfg-a", ConfigState::kKnownGood, "run succeeded inside its window", 12.0, run})));
  ASSERT_TRUE(IsOk(store_->SetConfigState({"cfg-a", ConfigState::kBad, "regressed", 13.0})));

  EXPECT_EQ(store_->GetConfigVersion("cfg-a")->state, ConfigState::kBad);
  Result<std::vector<ConfigStateChange>> history = store_->GetConfigHistory("cfg-a");
  ASSERT_TRUE(IsOk(history));
  ASSERT_EQ(history->size(), 3u);
  EXPECT_EQ((*history)[0].state, ConfigState::kCandidate);
  EXPECT_EQ((*history)[0].at, 10.0);
  EXPECT_EQ((*history)[1].state, ConfigState::kKnownGood);
  EXPECT_EQ((*history)[1].reason, "run succeeded inside its window");
  EXPECT_EQ((*history)[1].run_id, run);
  EXPECT_EQ((*history)[2].state, ConfigState::kBad);
  EXPECT_EQ((*history)[2].reason, "regressed");
  EXPECT_EQ((*history)[2].at, 13.0);
  EXPECT_FALSE((*history)[2].run_id.has_value());

  Status unknown = store_->SetConfigState({"nope", ConfigState::kBad, "x", 1.0});
  EXPECT_EQ(unknown.code(), Status::Code::kNotFound);
  EXPECT_TRUE(store_->GetConfigHistory("nope")->empty());
}

TEST_F(StoreTest, LastKnownGoodIsTheLatestMarkedThatIsStillGood) {
  EXPECT_FALSE(store_->LastKnownGoodConfig()->has_value());
  ASSERT_TRUE(IsOk(store_->SetConfigState({"cfg-a", ConfigState::kKnownGood, "ok", 11.0})));
  ASSERT_TRUE(IsOk(store_->SetConfigState({"cfg-b", ConfigState::kKnownGood, "ok", 21.0})));
  EXPECT_EQ(store_->LastKnownGoodConfig()->value().hash, "cfg-b");
  ASSERT_TRUE(IsOk(store_->SetConfigState({"cfg-b", ConfigState::kBad, "regressed", 22.0})));
  EXPECT_EQ(store_->LastKnownGoodConfig()->value().hash, "cfg-a");
  ASSERT_TRUE(IsOk(store_->SetConfigState({"cfg-b", ConfigState::kKnownGood, "fixed", 23.0})));
  EXPECT_EQ(store_->LastKnownGoodConfig()->value().hash, "cfg-b");
}

// --- Runs ------------------------------------------------------------------------------

TEST_F(StoreTest, RunRoundTripsEveryFieldWhenScheduledAndWhenFinished) {
  const std::int64_t earlier = CreateRun(SampleRun("cfg-a"));
  RunRecord scheduled = SampleRun("cfg-a");
  scheduled.fallback_of = earlier;
  scheduled.id = CreateRun(scheduled);
  EXPECT_GT(scheduled.id, earlier);
  Result<RunRecord> stored = store_->GetRun(scheduled.id);
  ASSERT_TRUE(IsOk(stored));
  EXPECT_EQ(*stored, scheduled);
  EXPECT_FALSE(stored->peak_memory.has_value());
  EXPECT_FALSE(stored->mfu.has_value());

  ASSERT_TRUE(IsOk(store_->MarkRunStarted(scheduled.id, 1'700'000'001.5)));
  stored = store_->GetRun(scheduled.id);
  EXPECT_EQ(stored->status, RunStatus::kRunning);
  EXPECT_EQ(stored->started_at, 1'700'000'001.5);

  RunRecord finished = FinishedRun(scheduled, RunStatus::kSucceeded);
  finished.software.trainerd_version = "0.1.1";  // a final record may refine any field
  ASSERT_TRUE(IsOk(store_->FinishRun(finished, {}, {}, {})));
  stored = store_->GetRun(scheduled.id);
  ASSERT_TRUE(IsOk(stored));
  EXPECT_EQ(*stored, finished);

  EXPECT_EQ(store_->GetRun(9999).status().code(), Status::Code::kNotFound);
}

TEST_F(StoreTest, ARunHasNoPlanUntilOneIsSetAndThenTheOneSet) {
  RunRecord unplanned = SampleRun("cfg-a");
  unplanned.plan = std::nullopt;
  const std::int64_t id = CreateRun(unplanned);
  EXPECT_EQ(store_->GetRun(id)->plan, std::nullopt);
  ASSERT_TRUE(IsOk(store_->MarkRunStarted(id, 1'700'000'001.5)));
  // Interrupted before planning: still no plan, never a placeholder.
  Result<std::vector<std::int64_t>> interrupted =
      store_->MarkUnfinishedAsInterrupted(1'700'000'002);
  ASSERT_TRUE(IsOk(interrupted));
  EXPECT_EQ(store_->GetRun(id)->plan, std::nullopt);
  EXPECT_EQ(store_->GetRun(id)->status, RunStatus::kInterrupted);

  RunRecord planned = SampleRun("cfg-a");
  planned.plan = std::nullopt;
  const std::int64_t second = CreateRun(planned);
  ASSERT_TRUE(IsOk(store_->MarkRunStarted(second, 1'700'000'003)));
  const PlanSpec chosen{16,
                        2,
                        {1},
                        Precision::kBf16,
                        StatePlacement::kDevice,
                        /*zero_stage=*/2,
                        /*output_chunk=*/64,
                        /*step_in_backward=*/true,
                        /*offload_activations=*/true};
  ASSERT_TRUE(IsOk(store_->SetRunPlan(second, chosen)));
  ASSERT_TRUE(IsOk(store_->MarkUnfinishedAsInterrupted(1'700'000'004)));
  EXPECT_EQ(store_->GetRun(second)->plan, chosen);
  // A finished run's plan is history.
  EXPECT_EQ(store_->SetRunPlan(second, PlanSpec{}).code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(store_->SetRunPlan(9999, chosen).code(), Status::Code::kNotFound);
  EXPECT_EQ(store_->SetRunPlan(CreateRun(planned), PlanSpec{0, 1, {}, Precision::kFp32}).code(),
            Status::Code::kInvalidArgument);
}

TEST_F(StoreTest, ARunThatTrainedMustHaveAPlan) {
  // A rejected run was refused after its plan was chosen: it has one too.
  for (const RunStatus status :
       {RunStatus::kSucceeded, RunStatus::kRegressed, RunStatus::kLeak, RunStatus::kRejected}) {
    SCOPED_TRACE(std::string(ToString(status)));
    RunRecord run = SampleRun("cfg-a");
    run.plan = std::nullopt;
    run.id = CreateRun(run);
    EXPECT_EQ(store_->FinishRun(FinishedRun(run, status), {}, {}, {}).code(),
              Status::Code::kInvalidArgument);
  }
  RunRecord crashed = SampleRun("cfg-a");
  crashed.plan = std::nullopt;
  crashed.id = CreateRun(crashed);
  EXPECT_TRUE(IsOk(store_->FinishRun(FinishedRun(crashed, RunStatus::kCrashed), {}, {}, {})));
}

TEST_F(StoreTest, RunLifecycleIsEnforced) {
  RunRecord running = SampleRun("cfg-a");
  running.status = RunStatus::kRunning;
  EXPECT_EQ(store_->CreateRun(running).status().code(), Status::Code::kInvalidArgument);

  RunRecord run = SampleRun("cfg-a");
  run.id = CreateRun(run);
  EXPECT_EQ(store_->MarkRunStarted(9999, 1.0).code(), Status::Code::kNotFound);
  ASSERT_TRUE(IsOk(store_->MarkRunStarted(run.id, 1.0)));
  EXPECT_EQ(store_->MarkRunStarted(run.id, 2.0).code(), Status::Code::kFailedPrecondition);

  run.status = RunStatus::kRunning;
  EXPECT_EQ(store_->FinishRun(run, {}, {}, {}).code(), Status::Code::kInvalidArgument);
  run.status = RunStatus::kOom;
  ASSERT_TRUE(IsOk(store_->FinishRun(run, {}, {}, {})));
  EXPECT_EQ(store_->FinishRun(run, {}, {}, {}).code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(store_->AppendMetrics(run.id, {SampleMetric(0)}).code(),
            Status::Code::kFailedPrecondition);
  EXPECT_EQ(store_->GetRun(run.id)->status, RunStatus::kOom);
}

TEST_F(StoreTest, RunMustReferenceARecordedConfigAndValidJson) {
  EXPECT_EQ(store_->CreateRun(SampleRun("unrecorded")).status().code(),
            Status::Code::kInvalidArgument);
  RunRecord bad_json = SampleRun("cfg-a");
  bad_json.shapes_json = "{not json";
  EXPECT_EQ(store_->CreateRun(bad_json).status().code(), Status::Code::kInvalidArgument);
  RunRecord bad_plan = SampleRun("cfg-a");
  bad_plan.plan->microbatch = 0;
  EXPECT_EQ(store_->CreateRun(bad_plan).status().code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(store_->ListRecentRuns(10)->empty());
}

TEST_F(StoreTest, MetricsAppendInBatchesAndKeepNaN) {
  const std::int64_t id = CreateRun(SampleRun("cfg-a"));
  ASSERT_TRUE(IsOk(store_->AppendMetrics(id, {SampleMetric(0), SampleMetric(1)})));
  UpdateMetric diverged = SampleMetric(2);
  diverged.loss = std::numeric_limits<double>::quiet_NaN();
  diverged.grad_norm = std::numeric_limits<double>::infinity();
  ASSERT_TRUE(IsOk(store_->AppendMetrics(id, {diverged})));

  Result<std::vector<UpdateMetric>> metrics = store_->GetMetrics(id);
  ASSERT_TRUE(IsOk(metrics));
  ASSERT_EQ(metrics->size(), 3u);
  const UpdateMetric expected = SampleMetric(1);
  EXPECT_EQ((*metrics)[1].update, 1);
  EXPECT_EQ((*metrics)[1].loss, expected.loss);
  EXPECT_EQ((*metrics)[1].learning_rate, expected.learning_rate);
  EXPECT_EQ((*metrics)[1].grad_norm, expected.grad_norm);
  EXPECT_EQ((*metrics)[1].samples_per_second, expected.samples_per_second);
  EXPECT_EQ((*metrics)[1].live_bytes, expected.live_bytes);
  EXPECT_TRUE(std::isnan((*metrics)[2].loss));
  EXPECT_TRUE(std::isinf((*metrics)[2].grad_norm));
}

TEST_F(StoreTest, MetricBatchIsAllOrNothing) {
  const std::int64_t id = CreateRun(SampleRun("cfg-a"));
  ASSERT_TRUE(IsOk(store_->AppendMetrics(id, {SampleMetric(0)})));
  // The last metric repeats update 0: the whole batch must be refused.
  Status status = store_->AppendMetrics(id, {SampleMetric(1), SampleMetric(2), SampleMetric(0)});
  EXPECT_EQ(status.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(store_->GetMetrics(id)->size(), 1u);
  EXPECT_EQ(store_->AppendMetrics(9999, {SampleMetric(0)}).code(), Status::Code::kNotFound);
}

TEST_F(StoreTest, FinishRunStoresMetricsEvalsAndEventsTogether) {
  RunRecord run = SampleRun("cfg-a");
  run.id = CreateRun(run);
  ASSERT_TRUE(IsOk(store_->MarkRunStarted(run.id, 2.0)));
  ASSERT_TRUE(IsOk(store_->AppendMetrics(run.id, {SampleMetric(0)})));
  const RunRecord finished = FinishedRun(run, RunStatus::kRegressed);
  const std::string predictions = R"({"entropy":[3,1],"top1":[0,4],"classes":[]})";
  const std::string windows = R"({"sums":[3.5,2.5],"terms":[2,2]})";
  const std::vector<SliceEval> evals = {{"en", 1, 1.5, 2.5, predictions, windows},
                                        {"code", 1, 2.25}};
  const std::vector<Event> events = {
      {0, 50.0, std::nullopt, "run_finished", Severity::kInfo, "done", R"({"updates":2})"},
      {0, 51.0, run.id, "regression", Severity::kError, "code slice regressed", "{}"}};
  ASSERT_TRUE(IsOk(store_->FinishRun(finished, {SampleMetric(1)}, evals, events)));

  EXPECT_EQ(store_->GetRun(run.id)->status, RunStatus::kRegressed);
  EXPECT_EQ(store_->GetMetrics(run.id)->size(), 2u);
  Result<std::vector<SliceEval>> stored_evals = store_->GetSliceEvals(run.id);
  ASSERT_TRUE(IsOk(stored_evals));
  ASSERT_EQ(stored_evals->size(), 2u);
  EXPECT_EQ((*stored_evals)[0].slice, "code");  // by update, then slice name
  EXPECT_EQ((*stored_evals)[0].loss, 2.25);
  EXPECT_EQ((*stored_evals)[0].baseline_loss, std::nullopt);
  EXPECT_EQ((*stored_evals)[0].predictions_json, "");
  EXPECT_EQ((*stored_evals)[0].windows_json, "");
  EXPECT_EQ((*stored_evals)[1].slice, "en");
  EXPECT_EQ((*stored_evals)[1].update, 1);
  EXPECT_EQ((*stored_evals)[1].baseline_loss, 2.5);
  EXPECT_EQ((*stored_evals)[1].predictions_json, predictions);
  EXPECT_EQ((*stored_evals)[1].windows_json, windows);

  Result<std::vector<Event>> stored_events = store_->GetRunEvents(run.id);
  ASSERT_TRUE(IsOk(stored_events));
  ASSERT_EQ(stored_events->size(), 2u);
  Event expected = events[0];
  expected.id = (*stored_events)[0].id;
  expected.run_id = run.id;  // events without a run belong to the finished run
  EXPECT_EQ((*stored_events)[0], expected);
  EXPECT_EQ((*stored_events)[1].kind, "regression");
  EXPECT_EQ((*stored_events)[1].severity, Severity::kError);
}

TEST_F(StoreTest, FailedFinishRunLeavesTheRunAsItWas) {
  RunRecord run = SampleRun("cfg-a");
  run.id = CreateRun(run);
  ASSERT_TRUE(IsOk(store_->MarkRunStarted(run.id, 2.0)));
  // The event's details are not JSON: it is the last write of the transaction to fail.
  const std::vector<Event> events = {{0, 50.0, run.id, "x", Severity::kInfo, "m", "{oops"}};
  Status status = store_->FinishRun(FinishedRun(run, RunStatus::kSucceeded),
                                    {SampleMetric(0), SampleMetric(1)}, {{"en", 1, 1.0}}, events);
  EXPECT_EQ(status.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(store_->GetRun(run.id)->status, RunStatus::kRunning);
  EXPECT_TRUE(store_->GetMetrics(run.id)->empty());
  EXPECT_TRUE(store_->GetSliceEvals(run.id)->empty());
  EXPECT_TRUE(store_->GetRunEvents(run.id)->empty());

  const std::vector<Event> other_run = {{0, 50.0, run.id + 1, "x", Severity::kInfo, "m", "{}"}};
  EXPECT_EQ(store_->FinishRun(FinishedRun(run, RunStatus::kSucceeded), {}, {}, other_run).code(),
            Status::Code::kInvalidArgument);
}

TEST_F(StoreTest, ListsRunsNewestFirstAndByStatus) {
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(CreateRun(SampleRun("cfg-a")));
  const std::int64_t oom = FinishedRunId(SampleRun("cfg-a"), RunStatus::kOom);
  const std::int64_t succeeded = FinishedRunId(SampleRun("cfg-b"), RunStatus::kSucceeded);

  Result<std::vector<RunRecord>> recent = store_->ListRecentRuns(3);
  ASSERT_TRUE(IsOk(recent));
  ASSERT_EQ(recent->size(), 3u);
  EXPECT_EQ((*recent)[0].id, succeeded);
  EXPECT_EQ((*recent)[1].id, oom);
  EXPECT_EQ((*recent)[2].id, ids.back());
  EXPECT_EQ(store_->ListRecentRuns(100)->size(), 7u);
  EXPECT_TRUE(store_->ListRecentRuns(0)->empty());
  EXPECT_EQ(store_->ListRecentRuns(-1).status().code(), Status::Code::kInvalidArgument);

  Result<std::vector<RunRecord>> scheduled = store_->ListRunsByStatus(RunStatus::kScheduled, 2);
  ASSERT_TRUE(IsOk(scheduled));
  ASSERT_EQ(scheduled->size(), 2u);
  EXPECT_EQ((*scheduled)[0].id, ids[4]);
  EXPECT_EQ((*scheduled)[1].id, ids[3]);
  Result<std::vector<RunRecord>> ooms = store_->ListRunsByStatus(RunStatus::kOom, 10);
  ASSERT_EQ(ooms->size(), 1u);
  EXPECT_EQ((*ooms)[0].id, oom);
  EXPECT_TRUE(store_->ListRunsByStatus(RunStatus::kLeak, 10)->empty());
}

// A scheduled run at a restart was left by a daemon killed between creating and starting it
// (seen in the 12-kill daemon test): left scheduled, the restarted daemon found nothing to
// resume in the window and idled until the next night.
TEST_F(StoreTest, RunsLeftRunningOrScheduledBecomeInterrupted) {
  const std::int64_t scheduled = CreateRun(SampleRun("cfg-a"));
  const std::int64_t first = CreateRun(SampleRun("cfg-a"));
  const std::int64_t second = CreateRun(SampleRun("cfg-b"));
  ASSERT_TRUE(IsOk(store_->MarkRunStarted(first, 5.0)));
  ASSERT_TRUE(IsOk(store_->MarkRunStarted(second, 6.0)));
  const std::int64_t done = FinishedRunId(SampleRun("cfg-a"), RunStatus::kSucceeded);

  Result<std::vector<std::int64_t>> interrupted = store_->MarkUnfinishedAsInterrupted(100.0);
  ASSERT_TRUE(IsOk(interrupted));
  EXPECT_EQ(*interrupted, (std::vector<std::int64_t>{scheduled, first, second}));
  EXPECT_EQ(store_->GetRun(first)->status, RunStatus::kInterrupted);
  EXPECT_EQ(store_->GetRun(second)->ended_at, 100.0);
  EXPECT_EQ(store_->GetRun(scheduled)->status, RunStatus::kInterrupted);
  EXPECT_EQ(store_->GetRun(scheduled)->started_at, std::nullopt);
  EXPECT_EQ(store_->GetRun(done)->status, RunStatus::kSucceeded);
  EXPECT_TRUE(store_->MarkUnfinishedAsInterrupted(101.0)->empty());
}

TEST_F(StoreTest, LastValidatedPlanIsTheNewestSucceededPlanOfConfigHardwareAndRelease) {
  const SoftwareFingerprint software = SampleRun("cfg-a").software;
  HardwareFingerprint other_device = SampleHardware();
  other_device.device_memory_bytes /= 2;
  EXPECT_FALSE(store_->LastValidatedPlan("cfg-a", SampleHardware(), software)->has_value());

  RunRecord old_plan = SampleRun("cfg-a");
  old_plan.plan = PlanSpec{1, 32, {0, 1, 2, 3}, Precision::kFp32};
  FinishedRunId(old_plan, RunStatus::kSucceeded);
  RunRecord new_plan = SampleRun("cfg-a");
  new_plan.plan = PlanSpec{8, 4, {}, Precision::kBf16};
  FinishedRunId(new_plan, RunStatus::kSucceeded);
  RunRecord failed_plan = SampleRun("cfg-a");
  failed_plan.plan = PlanSpec{16, 2, {}, Precision::kFp16};
  FinishedRunId(failed_plan, RunStatus::kOom);
  RunRecord small_device = SampleRun("cfg-a");
  small_device.hardware = other_device;
  small_device.plan = PlanSpec{2, 16, {1}, Precision::kBf16};
  FinishedRunId(small_device, RunStatus::kSucceeded);

  EXPECT_EQ(store_->LastValidatedPlan("cfg-a", SampleHardware(), software)->value(), new_plan.plan);
  EXPECT_EQ(store_->LastValidatedPlan("cfg-a", other_device, software)->value(), small_device.plan);
  EXPECT_FALSE(store_->LastValidatedPlan("cfg-b", SampleHardware(), software)->has_value());
  HardwareFingerprint unknown = SampleHardware();
  unknown.cpu_cores = 1;
  EXPECT_FALSE(store_->LastValidatedPlan("cfg-a", unknown, software)->has_value());

  // After an upgrade of trainerd or of LibTorch no plan is validated yet; a new BLAS or
  // compiler build of the same versions keeps it.
  SoftwareFingerprint upgraded = software;
  upgraded.trainerd_version += "-next";
  EXPECT_FALSE(store_->LastValidatedPlan("cfg-a", SampleHardware(), upgraded)->has_value());
  upgraded = software;
  upgraded.libtorch_version += ".1";
  EXPECT_FALSE(store_->LastValidatedPlan("cfg-a", SampleHardware(), upgraded)->has_value());
  upgraded = software;
  upgraded.blas += " (rebuilt)";
  upgraded.compiler += " (rebuilt)";
  EXPECT_EQ(store_->LastValidatedPlan("cfg-a", SampleHardware(), upgraded)->value(), new_plan.plan);
}

TEST_F(StoreTest, LastSucceededRunOnHardwareIsTheThroughputBaseline) {
  EXPECT_FALSE(store_->LastSucceededRun(SampleHardware())->has_value());
  FinishedRunId(SampleRun("cfg-a"), RunStatus::kSucceeded);
  const std::int64_t baseline = FinishedRunId(SampleRun("cfg-b"), RunStatus::kSucceeded);
  FinishedRunId(SampleRun("cfg-a"), RunStatus::kDeadline);
  RunRecord elsewhere = SampleRun("cfg-a");
  elsewhere.hardware.cpu_model = "Other CPU";
  FinishedRunId(elsewhere, RunStatus::kSucceeded);

  Result<std::optional<RunRecord>> found = store_->LastSucceededRun(SampleHardware());
  ASSERT_TRUE(IsOk(found));
  ASSERT_TRUE(found->has_value());
  EXPECT_EQ((*found)->id, baseline);
  EXPECT_EQ((*found)->samples_per_second, 250.5);
}

// The instruction set describes a hardware row without identifying it: a row recorded with
// none (before schema 6) is the same hardware, and takes the one it is next met with; a row
// that has one keeps it. Lookups by hardware ignore it.
TEST_F(StoreTest, AHardwareRowTakesTheInstructionSetItIsMetWithWhenItHadNone) {
  RunRecord before = SampleRun("cfg-a");
  before.hardware.isa = "";
  const std::int64_t first = FinishedRunId(before, RunStatus::kSucceeded);
  EXPECT_EQ(store_->GetRun(first)->hardware.isa, "");
  const std::int64_t second = FinishedRunId(SampleRun("cfg-a"), RunStatus::kSucceeded);
  EXPECT_EQ(store_->GetRun(first)->hardware.isa, "AVX-512 with bf16") << "the same row";
  EXPECT_EQ(store_->GetRun(second)->hardware.isa, "AVX-512 with bf16");
  RunRecord described_otherwise = SampleRun("cfg-a");
  described_otherwise.hardware.isa = "AVX2";
  const std::int64_t third = FinishedRunId(described_otherwise, RunStatus::kSucceeded);
  EXPECT_EQ(store_->GetRun(third)->hardware.isa, "AVX-512 with bf16");
  before.hardware.isa = "unknown to the lookup";
  EXPECT_EQ((*store_->LastSucceededRun(before.hardware))->id, third);
}

// --- Events ----------------------------------------------------------------------------

TEST_F(StoreTest, EventsRoundTripWithAndWithoutARun) {
  const std::int64_t run = CreateRun(SampleRun("cfg-a"));
  const Event global{
      0, 1.5, std::nullopt, "daemon_started", Severity::kWarning, "unclean stop", R"({"pid":42})"};
  Result<std::int64_t> global_id = store_->RecordEvent(global);
  ASSERT_TRUE(IsOk(global_id));
  Result<std::int64_t> run_event_id =
      store_->RecordEvent({0, 2.5, run, "oom_fallback", Severity::kError, "OOM", "{}"});
  ASSERT_TRUE(IsOk(run_event_id));
  EXPECT_GT(*run_event_id, *global_id);

  Result<std::vector<Event>> recent = store_->ListRecentEvents(10);
  ASSERT_TRUE(IsOk(recent));
  ASSERT_EQ(recent->size(), 2u);
  EXPECT_EQ((*recent)[0].id, *run_event_id);
  Event expected = global;
  expected.id = *global_id;
  EXPECT_EQ((*recent)[1], expected);
  EXPECT_EQ(store_->ListRecentEvents(1)->size(), 1u);
  EXPECT_EQ(store_->GetRunEvents(run)->size(), 1u);

  EXPECT_EQ(store_->RecordEvent({0, 3.0, 9999, "x", Severity::kInfo, "m", "{}"}).status().code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(store_->RecordEvent({0, 3.0, run, "x", Severity::kInfo, "m", "]"}).status().code(),
            Status::Code::kInvalidArgument);
}

// --- Releases --------------------------------------------------------------------------

TEST_F(StoreTest, ExactlyOneReleaseIsCurrentAfterEachSwitch) {
  const std::int64_t run = FinishedRunId(SampleRun("cfg-a"), RunStatus::kSucceeded);
  EXPECT_FALSE(store_->CurrentRelease()->has_value());
  const Release passed{0, run, "/models/a.pt", "sha256:a", true, R"({"en":1.5})", 40.0, true};
  Result<std::int64_t> first = store_->RecordRelease(passed);
  ASSERT_TRUE(IsOk(first));
  Result<std::int64_t> second = store_->RecordRelease({0, run, "/models/b.pt", "sha256:b", true});
  ASSERT_TRUE(IsOk(second));
  Result<std::int64_t> failed = store_->RecordRelease({0, run, "/models/c.pt", "sha256:c", false});
  ASSERT_TRUE(IsOk(failed));
  EXPECT_FALSE(store_->CurrentRelease()->has_value()) << "recorded releases are not current";

  ASSERT_TRUE(IsOk(store_->SetCurrentRelease(*first, 50)));
  Release expected = passed;
  expected.id = *first;
  expected.live_at = 50;  // the first release ever: no previous one
  EXPECT_EQ(store_->CurrentRelease()->value(), expected);

  ASSERT_TRUE(IsOk(store_->SetCurrentRelease(*second, 60)));
  EXPECT_EQ(store_->CurrentRelease()->value().id, *second);
  EXPECT_EQ(store_->CurrentRelease()->value().live_at, 60);
  EXPECT_EQ(store_->CurrentRelease()->value().previous_release_id, *first);
  EXPECT_FALSE(store_->GetRelease(*first)->current);
  // Current again later: it went live at 50, after no release, still.
  ASSERT_TRUE(IsOk(store_->SetCurrentRelease(*first, 70)));
  EXPECT_EQ(store_->GetRelease(*first)->live_at, 50);
  EXPECT_EQ(store_->GetRelease(*first)->previous_release_id, std::nullopt);
  ASSERT_TRUE(IsOk(store_->SetCurrentRelease(*second, 80)));

  EXPECT_EQ(store_->SetCurrentRelease(*failed, 90).code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(store_->SetCurrentRelease(9999, 90).code(), Status::Code::kNotFound);
  EXPECT_EQ(store_->CurrentRelease()->value().id, *second);

  Result<std::vector<Release>> releases = store_->ListReleases(10);
  ASSERT_TRUE(IsOk(releases));
  ASSERT_EQ(releases->size(), 3u);
  EXPECT_EQ((*releases)[0].id, *failed);
  EXPECT_EQ(std::count_if(releases->begin(), releases->end(),
                          [](const Release& release) { return release.current; }),
            1);
}

TEST_F(StoreTest, AFinishedRunTakesItsStorageBytes) {
  const std::int64_t running = CreateRun(SampleRun("cfg-a"));
  EXPECT_EQ(store_->SetRunStorage(running, 10, 20).code(), Status::Code::kFailedPrecondition);
  const std::int64_t done = FinishedRunId(SampleRun("cfg-a"), RunStatus::kSucceeded);
  EXPECT_EQ(store_->SetRunStorage(done, -1, 20).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(store_->SetRunStorage(9999, 1, 2).code(), Status::Code::kNotFound);
  ASSERT_TRUE(IsOk(store_->SetRunStorage(done, 1300, 1 << 20)));
  EXPECT_EQ(store_->GetRun(done)->storage_bytes, 1300);
  EXPECT_EQ(store_->GetRun(done)->state_dir_bytes, 1 << 20);
  EXPECT_EQ(store_->GetRun(running)->storage_bytes, std::nullopt);
}

TEST_F(StoreTest, AWithdrawnReleaseAndItsModelNeverBecomeCurrentAgain) {
  const std::int64_t run = FinishedRunId(SampleRun("cfg-a"), RunStatus::kSucceeded);
  const std::int64_t first = *store_->RecordRelease({0, run, "/m/a.pt", "sha256:a", true});
  const std::int64_t second = *store_->RecordRelease({0, run, "/m/b.pt", "sha256:b", true});
  const std::int64_t same_model = *store_->RecordRelease({0, run, "/m/b2.pt", "sha256:b", true});
  ASSERT_TRUE(IsOk(store_->SetCurrentRelease(first, 10)));
  EXPECT_EQ(store_->WithdrawRelease(second, first, "{}", 15).code(),
            Status::Code::kFailedPrecondition)
      << "only the current release is withdrawn";
  ASSERT_TRUE(IsOk(store_->SetCurrentRelease(second, 20)));
  ASSERT_TRUE(IsOk(store_->SetReleasePinned(second, true)));
  EXPECT_EQ(store_->WithdrawRelease(second, first, R"({"why":"x"})", 30).code(),
            Status::Code::kFailedPrecondition)
      << "a pinned release stays";
  EXPECT_TRUE(store_->GetRelease(second)->current);
  ASSERT_TRUE(IsOk(store_->SetReleasePinned(second, false)));
  ASSERT_TRUE(IsOk(store_->WithdrawRelease(second, first, R"({"why":"x"})", 30)));
  EXPECT_EQ(store_->CurrentRelease()->value().id, first);
  EXPECT_EQ(store_->GetRelease(second)->withdrawn_json, R"({"why":"x"})");
  EXPECT_EQ(store_->SetCurrentRelease(second, 40).code(), Status::Code::kFailedPrecondition);
  const Status again = store_->SetCurrentRelease(same_model, 40);
  EXPECT_EQ(again.code(), Status::Code::kFailedPrecondition) << "another release of its model";
  EXPECT_NE(again.message().find("release " + std::to_string(second) + " was withdrawn"),
            std::string::npos)
      << again.message();
  EXPECT_EQ(store_->CurrentRelease()->value().id, first);
  EXPECT_EQ(store_->SetReleasePinned(9999, true).code(), Status::Code::kNotFound);

  Result<std::vector<Release>> found = store_->FindReleasesByArtifact("sha256:b");
  ASSERT_TRUE(IsOk(found));
  ASSERT_EQ(found->size(), 2u);
  EXPECT_EQ((*found)[0].id, same_model);
  EXPECT_TRUE(store_->FindReleasesByArtifact("sha256:c")->empty());
}

TEST_F(StoreTest, OutcomesAreOneTransactionIdempotentPerKeyAndTotalledByCount) {
  const std::int64_t run = FinishedRunId(SampleRun("cfg-a"), RunStatus::kSucceeded);
  const std::int64_t release = *store_->RecordRelease({0, run, "/m/a.pt", "sha256:a", true});
  const std::vector<Outcome> batch = {{release, "en", "ctr", 100, 0.10, 300},
                                      {release, "en", "ctr", 200, 0.20, 100},
                                      {release, "de", "ctr", 150, 0.5, 1}};
  Result<std::int64_t> added = store_->RecordOutcomes(batch);
  ASSERT_TRUE(IsOk(added));
  EXPECT_EQ(*added, 3);
  EXPECT_EQ(*store_->RecordOutcomes(batch), 0) << "the same lines again add nothing";

  Result<std::vector<OutcomeTotal>> totals = store_->GetOutcomeTotals(release, 1000);
  ASSERT_TRUE(IsOk(totals));
  ASSERT_EQ(totals->size(), 2u);
  EXPECT_EQ((*totals)[0], (OutcomeTotal{"de", "ctr", 0.5, 1, 150, 150, 1, 0.25}));
  EXPECT_EQ((*totals)[1].slice, "en");
  EXPECT_DOUBLE_EQ((*totals)[1].value, (0.10 * 300 + 0.20 * 100) / 400);
  EXPECT_EQ((*totals)[1].count, 400);
  EXPECT_EQ((*totals)[1].lines, 2);
  EXPECT_DOUBLE_EQ((*totals)[1].sum_of_squares, 0.01 * 300 + 0.04 * 100);
  EXPECT_EQ(store_->GetOutcomeTotals(release, 120)->size(), 1u) << "only those up to the time";

  // A batch with one bad outcome stores none of it.
  for (const Outcome& bad :
       {Outcome{release, "en", "ctr", 100, 0.3, 300},  // another value
        Outcome{release, "en", "ctr", 300, NAN, 1}, Outcome{release, "en", "ctr", 300, 0.1, 0},
        // Finite, but a release's sum of value * count would overflow to inf.
        Outcome{release, "en", "ctr", 300, 1e300, 1'000'000'000'000},
        Outcome{release, "en", "ctr", 300, -1.1e15, 1}, Outcome{9999, "en", "ctr", 300, 0.1, 1}}) {
    const std::vector<Outcome> mixed = {{release, "fr", "ctr", 100, 0.4, 10}, bad};
    Result<std::int64_t> refused = store_->RecordOutcomes(mixed);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().code(), Status::Code::kInvalidArgument);
    EXPECT_NE(refused.status().message().find("outcome 2"), std::string::npos)
        << refused.status().message();
    EXPECT_EQ(store_->GetOutcomeTotals(release, 1000)->size(), 2u) << "fr stored nothing";
  }
  Result<std::int64_t> named = store_->RecordOutcomes(
      {{release, "fr", "ctr", 100, 0.4, 10}, {release, "en", "ctr", 300, 0.1, 0}},
      [](std::size_t i) { return "outcomes.csv:" + std::to_string(i + 2); });
  ASSERT_FALSE(named.ok());
  EXPECT_NE(named.status().message().find("outcomes.csv:3 (release"), std::string::npos)
      << named.status().message();
}

}  // namespace
}  // namespace trainerd::store
