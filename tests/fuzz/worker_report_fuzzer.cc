// libFuzzer harness for the worker's JSON-lines event stream (docs/trainer-run.md): any bytes,
// split into lines, each consumed by a WorkerReport, then read the way the daemon reads a
// report: metrics, events and evals taken for the store, progress for the status answer
// and trainerctl, and the start, finish and error objects as NightlyCycle reads them with
// nlohmann's value(key, default), which throws on a field of another type. Nothing may
// throw, crash, leak or hit undefined behaviour. Seeds: corpus/worker_report/ (event streams
// of trainer-run).
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

// The reads of daemon/src/nightly_cycle.cc (FillFromReport, DescribeFailure, PublishModel,
// the exit classification): keep them in step.
std::size_t ReadLikeTheNightlyCycle(const daemon::WorkerReport& report) {
  std::size_t bytes = 0;
  const Json& start = report.start();
  if (start.is_object()) {
    const Json software = start.value("software", Json::object());
    bytes += software.value("torch_version", "").size();
    bytes += software.value("blas", "").size();
    bytes += software.value("compiler", "").size();
    bytes += Json{{"model", start.value("model", Json::object())},
                  {"effective_batch", start.value("effective_batch", 0)}}
                 .dump()
                 .size();
    bytes += Json{{"training", start.value("seed", 0)}}.dump().size();
    bytes += start.value("data", Json::object()).value("fingerprint", "").size();
  }
  const Json& fin = report.finish();
  if (fin.is_object()) {
    bytes += fin.value("throughput_method", "").size();
    double sum = 0;
    for (const char* key : {"samples_per_second", "tokens_per_second", "mfu", "final_train_loss"}) {
      const auto it = fin.find(key);
      if (it != fin.end() && it->is_number()) sum += it->get<double>();
    }
    sum += static_cast<double>(fin.value("peak_bytes", std::int64_t{0}));
    const int resumed_from = start.is_object() ? start.value("resumed_from_update", 0) : 0;
    sum += static_cast<double>(fin.value("updates", 0) - resumed_from);
    sum += fin.value("elapsed_seconds", 0.0);
    bytes += fin.value("model_sha256", "").size() + fin.value("model_path", "").size();
    bytes += std::isnan(sum) ? 1 : 0;
  }
  const Json& error = report.error();
  if (error.is_object())
    bytes += error.value("kind", "").size() + error.value("message", "").size();
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
