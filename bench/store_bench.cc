// Run store benchmark: per-update metric inserts per second with synchronous=FULL, batched
// per transaction, and the time to list the last 100 runs with 10k runs stored. Prints one
// JSON object to stdout.
//
//   store_bench [DIR]   DIR: where the databases go (default: a new directory under
//                       $TMPDIR or /tmp, removed afterwards). Commit rates depend on the
//                       file system's fsync: run it on the disk the daemon will use.
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "trainerd/store/store.h"

namespace {

using trainerd::Result;
using trainerd::Status;
using trainerd::store::RunRecord;
using trainerd::store::Store;
using trainerd::store::UpdateMetric;
using Clock = std::chrono::steady_clock;

constexpr int kCommitsPerBatchSize = 200;
constexpr int kStoredRuns = 10'000;
constexpr int kListLimit = 100;
constexpr int kListCalls = 200;

[[noreturn]] void Fail(const Status& status) {
  std::fprintf(stderr, "store_bench: %s\n", status.message().c_str());
  std::exit(1);
}

template <typename T>
T Check(Result<T> result) {
  if (!result.ok()) Fail(result.status());
  return std::move(result).value();
}

void Check(const Status& status) {
  if (!status.ok()) Fail(status);
}

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::unique_ptr<Store> OpenWithConfig(const std::string& path) {
  std::unique_ptr<Store> store = Check(Store::Open(path));
  Check(store->RecordConfigVersion({"cfg", "model: bench\n", 0.0}));
  return store;
}

RunRecord BenchRun() {
  RunRecord run;
  run.config_hash = "cfg";
  run.plan = trainerd::PlanSpec{4, 8, {0, 1, 2, 3}, trainerd::Precision::kBf16};
  run.hardware = {"Bench CPU", 16, std::int64_t{64} << 30, "Bench GPU", std::int64_t{80} << 30,
                  "AVX-512"};
  run.software = {"0.1.0", "2.1.0", "OpenBLAS", "GCC 12"};
  run.shapes_json = R"({"sequence_length":512})";
  return run;
}

// Metric inserts per second when each AppendMetrics call (one commit) carries `batch`.
void BenchMetricInserts(const std::string& dir, int batch, bool last) {
  std::unique_ptr<Store> store = OpenWithConfig(dir + "/metrics_" + std::to_string(batch) + ".db");
  const std::int64_t run = Check(store->CreateRun(BenchRun()));
  std::vector<UpdateMetric> metrics(static_cast<std::size_t>(batch));
  std::int64_t update = 0;
  const Clock::time_point start = Clock::now();
  for (int commit = 0; commit < kCommitsPerBatchSize; ++commit) {
    for (UpdateMetric& metric : metrics) {
      metric = {update++, 2.0, 1e-3, 1.0, 300.0, std::int64_t{1} << 30};
    }
    Check(store->AppendMetrics(run, metrics));
  }
  const double seconds = SecondsSince(start);
  std::printf(
      "    {\"batch\": %d, \"commits\": %d, \"seconds\": %.3f, \"metrics_per_second\": %.0f, "
      "\"commits_per_second\": %.1f}%s\n",
      batch, kCommitsPerBatchSize, seconds, static_cast<double>(update) / seconds,
      kCommitsPerBatchSize / seconds, last ? "" : ",");
}

// Stores kStoredRuns runs, one commit each as the daemon records them, then times
// ListRecentRuns(kListLimit).
void BenchListRecentRuns(const std::string& dir) {
  std::unique_ptr<Store> store = OpenWithConfig(dir + "/runs.db");
  const Clock::time_point fill_start = Clock::now();
  for (int i = 0; i < kStoredRuns; ++i) Check(store->CreateRun(BenchRun()));
  const double fill_seconds = SecondsSince(fill_start);

  std::vector<double> call_ms;
  for (int call = 0; call < kListCalls; ++call) {
    const Clock::time_point start = Clock::now();
    const std::vector<RunRecord> runs = Check(store->ListRecentRuns(kListLimit));
    call_ms.push_back(SecondsSince(start) * 1e3);
    if (runs.size() != kListLimit) Fail(Status::Internal("ListRecentRuns returned too few runs"));
  }
  std::sort(call_ms.begin(), call_ms.end());
  std::printf(
      "  \"list_recent_runs\": {\"runs_stored\": %d, \"limit\": %d, \"calls\": %d, "
      "\"median_ms\": %.3f, \"p90_ms\": %.3f, \"create_runs_per_second\": %.1f}\n",
      kStoredRuns, kListLimit, kListCalls, call_ms[call_ms.size() / 2],
      call_ms[call_ms.size() * 9 / 10], kStoredRuns / fill_seconds);
}

}  // namespace

int main(int argc, char** argv) {
#ifndef NDEBUG
  std::fprintf(stderr, "store_bench: WARNING: built without NDEBUG; figures are not optimized\n");
#endif
  std::string dir;
  bool remove_dir = false;
  if (argc > 1) {
    dir = argv[1];
  } else {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp != nullptr ? tmp : "/tmp") + "/store_bench_XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) Fail(Status::IOError("mkdtemp " + pattern));
    dir = pattern;
    remove_dir = true;
  }

  std::printf("{\n  \"benchmark\": \"store\",\n  \"synchronous\": \"FULL\",\n");
  std::printf("  \"directory\": \"%s\",\n  \"metric_inserts\": [\n", dir.c_str());
  const std::vector<int> batches = {1, 10, 100};
  for (std::size_t i = 0; i < batches.size(); ++i) {
    BenchMetricInserts(dir, batches[i], i + 1 == batches.size());
  }
  std::printf("  ],\n");
  BenchListRecentRuns(dir);
  std::printf("}\n");

  if (remove_dir) std::filesystem::remove_all(dir);
  return 0;
}
