// libFuzzer harness for the worker's JSON-lines event stream (docs/trainer-run.md): any bytes,
// split into lines, each consumed by a WorkerReport (the worker protocol's parser), then read
// the way the daemon reads a report: metrics, events and evals taken for the store, progress
// for the status answer and trainerctl, and the typed start, finish and error events as the
// cycle's steps read them. Nothing may throw, crash, leak or hit undefined behaviour. Seeds:
// corpus/worker_report/ (event streams of trainer-run).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "trainerd/daemon/worker_report.h"
#include "trainerd/trainer/spec/units.h"

namespace trainerd::fuzz {
namespace {

using Json = nlohmann::json;

// The reads of the cycle's steps (daemon/src/cycle/: the train step's FillFromReport and
// DescribeFailure, the release step's Publish, the exit classification): keep them in step.
std::size_t ReadLikeTheNightlyCycle(const daemon::WorkerReport& report) {
  std::size_t bytes = 0;
  if (const std::optional<StartEvent>& start = report.start()) {
    bytes += start->software.torch_version.size() + start->software.blas.size() +
             start->software.compiler.size();
    bytes += Json{{"model", ToJson(start->model)}, {"effective_batch", start->effective_batch}}
                 .dump()
                 .size();
    bytes += Json{{"training", start->seed}}.dump().size();
    bytes += start->data.fingerprint.size();
  }
  if (const std::optional<FinishEvent>& fin = report.finish()) {
    bytes += fin->throughput_method.size();
    double sum = fin->samples_per_second.value_or(0) + fin->tokens_per_second.value_or(0) +
                 fin->mfu.value_or(0) + fin->final_train_loss.value_or(0);
    sum += static_cast<double>(fin->peak_bytes);
    const int resumed_from = report.start() ? report.start()->resumed_from_update : 0;
    sum += static_cast<double>(fin->updates - resumed_from);
    sum += fin->elapsed_seconds;
    bytes += fin->model_sha256.hex.size() + fin->model_path.size();
    for (const FinishEvent::Companion& companion : fin->model_files.companions) {
      bytes += companion.path.size() + companion.sha256.hex.size();
    }
    bytes += std::isnan(sum) ? 1 : 0;
  }
  if (const std::optional<ErrorEvent>& error = report.error()) {
    bytes += error->kind.size() + error->message.size();
  }
  return bytes;
}

}  // namespace
}  // namespace trainerd::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using trainerd::fuzz::Expect;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  trainerd::daemon::WorkerReport report;
  double now = 1'767'225'600;
  std::size_t metrics = 0;
  for (std::size_t begin = 0; begin <= input.size();) {
    std::size_t end = input.find('\n', begin);
    if (end == std::string_view::npos) end = input.size();
    report.Consume(std::string(input.substr(begin, end - begin)), now);
    now += 0.5;
    begin = end + 1;
    // As the nightly cycle does after every line: events to the store, metrics in batches,
    // progress for the status answer (trainerctl prints the ETA as a duration).
    for (const trainerd::store::Event& event : report.TakeEvents()) {
      Expect(nlohmann::json::accept(event.details_json), "event details are not JSON");
    }
    if (report.pending_metrics() >= 3) metrics += report.TakeMetrics().size();
    trainerd::FormatDuration(report.eta_seconds());
  }
  metrics += report.TakeMetrics().size();
  Expect(report.pending_metrics() == 0, "metrics left after TakeMetrics");
  for (const trainerd::store::SliceEval& eval : report.evals()) metrics += eval.slice.size();
  metrics += trainerd::fuzz::ReadLikeTheNightlyCycle(report);
  Expect(metrics != static_cast<std::size_t>(-1), "impossible size");
  return 0;
}
