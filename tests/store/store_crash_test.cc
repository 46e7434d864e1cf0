// Crash safety: a writer process is killed with SIGKILL at random moments while it records
// runs; after every kill the file must be intact, hold every run whose FinishRun returned,
// and show no run half-written.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <set>
#include <thread>

#include "test_util.h"
#include "trainerd/store/store.h"

namespace trainerd::store {
namespace {

using testing::IsOk;
using testing::RawDb;
using testing::SampleMetric;
using testing::SampleRun;
using testing::TempDir;

constexpr int kKills = 50;
constexpr int kMaxKillDelayMs = 120;
constexpr std::size_t kMetricBatch = 4;  // AppendMetrics batch size of the writer

// How many metrics the writer records for a run: varies so batches end unevenly.
std::size_t MetricCount(std::int64_t run_id) { return 2 * kMetricBatch + 1 + run_id % 3; }

std::vector<UpdateMetric> Metrics(std::size_t begin, std::size_t end) {
  std::vector<UpdateMetric> metrics;
  for (std::size_t update = begin; update < end; ++update) {
    metrics.push_back(SampleMetric(static_cast<std::int64_t>(update)));
  }
  return metrics;
}

// The child: records runs the way the daemon does until it is killed, writing each run's
// id to `report_fd` after FinishRun returned. Never returns.
[[noreturn]] void WriteRunsForever(const std::string& path, int report_fd) {
  Result<std::unique_ptr<Store>> opened = Store::Open(path, {.check_integrity_on_open = false});
  if (!opened.ok()) _exit(2);
  Store& store = **opened;
  if (!store.RecordConfigVersion({"cfg", "model: tiny\n", 1.0}).ok()) _exit(3);
  for (;;) {
    RunRecord run = SampleRun("cfg");
    Result<std::int64_t> id = store.CreateRun(run);
    if (!id.ok() || !store.MarkRunStarted(*id, 2.0).ok()) _exit(4);
    run.id = *id;
    const std::size_t count = MetricCount(run.id);
    std::size_t appended = 0;
    for (; appended + kMetricBatch < count; appended += kMetricBatch) {
      if (!store.AppendMetrics(run.id, Metrics(appended, appended + kMetricBatch)).ok()) _exit(5);
    }
    run = testing::FinishedRun(run, RunStatus::kSucceeded);
    const std::vector<Event> events = {{0, 3.0, std::nullopt, "a", Severity::kInfo, "a", "{}"},
                                       {0, 4.0, std::nullopt, "b", Severity::kInfo, "b", "{}"}};
    if (!store.FinishRun(run, Metrics(appended, count), {{"en", 1, 1.0}}, events).ok()) _exit(6);
    const std::string line = std::to_string(run.id) + "\n";
    if (write(report_fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) _exit(7);
  }
}

// Runs a writer for `delay`, kills it, and returns the ids it reported.
std::vector<std::int64_t> RunWriterAndKill(const std::string& path,
                                           std::chrono::milliseconds delay) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    WriteRunsForever(path, fds[1]);
  }
  close(fds[1]);
  std::this_thread::sleep_for(delay);
  EXPECT_EQ(kill(pid, SIGKILL), 0);
  int wait_status = 0;
  EXPECT_EQ(waitpid(pid, &wait_status, 0), pid);
  // Anything but our SIGKILL means the writer failed by itself.
  EXPECT_TRUE(WIFSIGNALED(wait_status) && WTERMSIG(wait_status) == SIGKILL)
      << "writer exited with status " << WEXITSTATUS(wait_status);

  std::string reported;
  char buffer[4096];
  for (ssize_t n; (n = read(fds[0], buffer, sizeof buffer)) > 0;) reported.append(buffer, n);
  close(fds[0]);
  std::vector<std::int64_t> ids;
  for (std::size_t start = 0, end; (end = reported.find('\n', start)) != std::string::npos;
       start = end + 1) {
    ids.push_back(std::stoll(reported.substr(start, end - start)));
  }
  return ids;
}

// Checks one run: a finished run is complete; an unfinished one holds whole metric batches
// only, and nothing FinishRun writes.
void ExpectWholeRun(Store& store, const RunRecord& run) {
  SCOPED_TRACE("run " + std::to_string(run.id));
  Result<std::vector<UpdateMetric>> metrics = store.GetMetrics(run.id);
  Result<std::vector<SliceEval>> evals = store.GetSliceEvals(run.id);
  Result<std::vector<Event>> events = store.GetRunEvents(run.id);
  ASSERT_TRUE(IsOk(metrics));
  ASSERT_TRUE(IsOk(evals));
  ASSERT_TRUE(IsOk(events));
  for (std::size_t i = 0; i < metrics->size(); ++i) {
    EXPECT_EQ((*metrics)[i].update, static_cast<std::int64_t>(i));
    EXPECT_EQ((*metrics)[i].loss, SampleMetric(static_cast<std::int64_t>(i)).loss);
  }
  if (run.status == RunStatus::kSucceeded) {
    EXPECT_EQ(metrics->size(), MetricCount(run.id));
    EXPECT_EQ(evals->size(), 1u);
    EXPECT_EQ(events->size(), 2u);
    EXPECT_TRUE(run.peak_memory.has_value());
    EXPECT_TRUE(run.ended_at.has_value());
  } else {
    EXPECT_TRUE(run.status == RunStatus::kScheduled || run.status == RunStatus::kInterrupted)
        << ToString(run.status);
    EXPECT_EQ(metrics->size() % kMetricBatch, 0u);
    EXPECT_LT(metrics->size(), MetricCount(run.id));
    EXPECT_TRUE(evals->empty());
    EXPECT_TRUE(events->empty());
  }
}

TEST(StoreCrashTest, KilledWriterLeavesEveryCommittedRunWholeAndNoPartialOne) {
  TempDir dir;
  const std::string path = dir.File("runs.db");
  std::mt19937 random(20240501);
  std::uniform_int_distribution<int> delay_ms(0, kMaxKillDelayMs);
  std::set<std::int64_t> committed;

  for (int kill_index = 0; kill_index < kKills; ++kill_index) {
    SCOPED_TRACE("kill " + std::to_string(kill_index));
    const auto delay = std::chrono::milliseconds(delay_ms(random));
    for (std::int64_t id : RunWriterAndKill(path, delay)) committed.insert(id);
    if (!std::filesystem::exists(path)) continue;  // killed before the file was created

    EXPECT_EQ(RawDb(path).Query("PRAGMA integrity_check"), "ok");
    // Reopen as the restarted daemon would.
    Result<std::unique_ptr<Store>> store = Store::Open(path);
    ASSERT_TRUE(IsOk(store));
    ASSERT_TRUE(IsOk((*store)->MarkUnfinishedAsInterrupted(5.0)));
    Result<std::vector<RunRecord>> runs = (*store)->ListRecentRuns(1'000'000);
    ASSERT_TRUE(IsOk(runs));
    std::set<std::int64_t> present;
    for (const RunRecord& run : *runs) {
      present.insert(run.id);
      ExpectWholeRun(**store, run);
      EXPECT_TRUE(run.status == RunStatus::kSucceeded || !committed.contains(run.id));
    }
    for (std::int64_t id : committed) EXPECT_TRUE(present.contains(id)) << "lost run " << id;
    if (::testing::Test::HasFailure()) return;
  }
  EXPECT_FALSE(committed.empty()) << "no writer got as far as one committed run";
}

}  // namespace
}  // namespace trainerd::store
