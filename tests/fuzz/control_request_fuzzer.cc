// libFuzzer harness for the control socket's read-only requests: any bytes as one request
// line, parsed as ControlServer does (ParseControlRequest) and answered from a real SQLite
// run store (AnswerFromStore), then serialized as the server writes it. Nothing may throw,
// crash, leak or hit undefined behaviour, and every answer is {"ok": bool, ...}. The store is
// created once, in a temporary folder, with config versions, a finished and a running run, events,
// evals and a current release, so that every command has something to read. Seeds:
// corpus/control_request/ (the requests of docs/operations.md, "The control socket").
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "trainerd/common/sha256.h"
#include "trainerd/daemon/control_queries.h"
#include "trainerd/store/store.h"

namespace trainerd::fuzz {
namespace {

namespace store = trainerd::store;

struct Fixture {
  std::string dir;
  std::string job_path;
  std::unique_ptr<store::Store> store;
};
Fixture* fixture = nullptr;

store::RunRecord Run(const std::string& config_hash, double created_at) {
  store::RunRecord run;
  run.config_hash = config_hash;
  run.created_at = created_at;
  run.deadline_at = created_at + 6 * 3600;
  run.hardware = {"AMD EPYC", 2, std::int64_t{24} << 30, "cpu", std::int64_t{24} << 30, "AVX2"};
  run.software = {"0.1.0", "1.13.1", "OpenBLAS 0.3.21", "GCC 12.2.0"};
  run.shapes_json = R"({"model":{"kind":"gpt","blocks":4},"effective_batch":32})";
  run.seeds_json = R"({"training":1234})";
  run.data_fingerprint = "sha256:5d41402abc4b2a76";
  return run;
}

void Seed(store::Store& s, const std::string& job_text) {
  const double t0 = 1'767'225'600;  // 2026-01-01
  const std::string good = Sha256Hex(job_text);
  Must(s.RecordConfigVersion({good, job_text, t0, store::ConfigState::kCandidate}), "config");
  const std::string old_text = job_text + "# an older version\n";
  const std::string old = Sha256Hex(old_text);
  Must(s.RecordConfigVersion({old, old_text, t0 - 86400, store::ConfigState::kCandidate}),
       "old config");
  Must(s.SetConfigState({old, store::ConfigState::kBad, "crashed", t0 - 80000}), "bad");

  const std::int64_t done = Must(s.CreateRun(Run(good, t0)), "run 1");
  Must(s.MarkRunStarted(done, t0 + 1), "start 1");
  Must(s.SetRunPlan(done, PlanSpec{4, 8, {0, 2}, Precision::kBf16}), "plan 1");
  store::RunRecord finished = Must(s.GetRun(done), "get 1");
  finished.status = store::RunStatus::kSucceeded;
  finished.ended_at = t0 + 3600;
  finished.throughput_method = "device-synchronized, 5 warm-up updates excluded";
  finished.peak_memory = store::MemoryByCategory{1000, 1000, 2000, 8000, 512, 64, 12345};
  finished.samples_per_second = 254.6;
  finished.tokens_per_second = 32588.8;
  finished.mfu = 0.41;
  finished.cost_per_sample = 0.0002;
  finished.final_loss = 1.125;
  std::vector<store::UpdateMetric> metrics;
  for (int u = 1; u <= 3; ++u) metrics.push_back({u, 3.0 / u, 3e-3, 0.5, 250.0, 1 << 20});
  Must(s.FinishRun(finished, metrics, {{"GPL-3", 3, 1.5}, {"Apache-2.0", 3, 1.25}},
                   {{0, t0 + 2, std::nullopt, "worker_checkpoint", store::Severity::kInfo,
                     "training checkpoint at update 3 (final)", R"({"update":3})"}}),
       "finish 1");
  Must(s.SetConfigState({good, store::ConfigState::kKnownGood, "run 1 succeeded", t0 + 3600, done}),
       "known-good");
  const std::int64_t release =
      Must(s.RecordRelease({0, done, "/var/lib/trainerd/releases/1.pt", std::string(64, 'a'), true,
                            R"({"slices":{"GPL-3":{"loss":1.5}}})", t0 + 3600, false}),
           "release");
  Must(s.SetCurrentRelease(release, t0 + 3600), "current release");

  const std::int64_t running = Must(s.CreateRun(Run(good, t0 + 86400)), "run 2");
  Must(s.MarkRunStarted(running, t0 + 86401), "start 2");
  Must(s.RecordEvent({0, t0 + 86402, running, "plan_chosen", store::Severity::kInfo,
                      "reused the last validated plan", "{}"}),
       "event 2");
}

void RemoveFixture() {
  if (fixture == nullptr) return;
  fixture->store.reset();
  std::error_code ignored;
  std::filesystem::remove_all(fixture->dir, ignored);
}

}  // namespace
}  // namespace trainerd::fuzz

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  using namespace trainerd::fuzz;
  std::string pattern = (std::filesystem::temp_directory_path() / "trainerd-fuzz-XXXXXX").string();
  Expect(::mkdtemp(pattern.data()) != nullptr, "mkdtemp");
  fixture = new Fixture{pattern, pattern + "/job.yaml", nullptr};
  const std::string job_text =
      "model: {kind: gpt}\ndata: {files: [/usr/share/common-licenses/GPL-3]}\n";
  std::ofstream(fixture->job_path, std::ios::binary) << job_text;
  fixture->store = Must(trainerd::store::Store::Open(fixture->dir + "/trainerd.db"), "open");
  Seed(*fixture->store, job_text);
  std::atexit(RemoveFixture);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace trainerd::daemon;
  using trainerd::fuzz::Expect;
  using trainerd::fuzz::fixture;
  const std::string_view line(reinterpret_cast<const char*>(data), size);
  const trainerd::Result<nlohmann::json> request = ParseControlRequest(line);
  const nlohmann::json response =
      request.ok() ? AnswerFromStore(*fixture->store, fixture->job_path, *request)
                   : Error(kBadRequest, request.status().message());
  Expect(response.is_object() && response.contains("ok") && response["ok"].is_boolean(),
         "answer without a boolean \"ok\"");
  // What docs/operations.md promises of the arguments: an accepted limit is in [1, 10000],
  // an accepted run id is the run shown.
  if (request.ok() && response["ok"] == true) {
    const nlohmann::json& r = *request;
    if (r["command"] == "runs" && r.contains("limit")) {
      Expect(r["limit"].is_number_integer() && r["limit"] >= 1 && r["limit"] <= 10000,
             "runs accepted the limit " + r["limit"].dump());
    }
    if (r["command"] == "show") {
      Expect(response["result"]["run"]["id"] == r["run"], "show answered another run");
    }
  }
  // As ControlServer writes it: dump() throws on invalid UTF-8.
  const std::string written = response.dump() + "\n";
  Expect(written.size() > 1, "empty answer");
  return 0;
}
