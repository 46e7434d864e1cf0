// The worker's event stream as the daemon reads it (the worker protocol's parser): what each
// event records, and that lines of the wrong shape (found by tests/fuzz/worker_report_fuzzer)
// are ignored field by field, named in a worker_protocol warning, instead of throwing out of
// Consume or out of the nightly cycle's reads.
#include "trainerd/daemon/worker_report.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace trainerd::daemon {
namespace {

using Json = nlohmann::json;

constexpr double kNow = 1'767'225'600;
const std::string kSha =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";  // SHA-256 of nothing

TEST(WorkerReportTest, RecordsStartUpdatesEvalsCheckpointsAndFinish) {
  WorkerReport report;
  report.Consume(R"({"event":"start","updates":300,"resumed_from_update":150,"seed":7})", kNow);
  report.Consume(R"({"event":"update","update":151,"loss":2.5,"lr":0.001,"grad_norm":null,)"
                 R"("samples_per_second":250,"live_bytes":1048576,"eta_seconds":30})",
                 kNow);
  report.Consume(R"({"event":"eval","update":151,"slices":[{"name":"GPL-3","loss":1.5}]})", kNow);
  report.Consume(R"({"event":"checkpoint","update":151,"reason":"interval"})", kNow);
  report.Consume(R"({"event":"finish","updates":300,"model_sha256":")" + kSha + R"("})", kNow);
  EXPECT_EQ(report.updates(), 300);
  EXPECT_EQ(report.updates_done(), 151);
  EXPECT_DOUBLE_EQ(report.eta_seconds(), 30);
  EXPECT_EQ(report.last_checkpoint_update(), 151);
  const std::vector<store::UpdateMetric> metrics = report.TakeMetrics();
  ASSERT_EQ(metrics.size(), 1u);
  EXPECT_EQ(metrics[0].update, 151);
  EXPECT_EQ(metrics[0].live_bytes, 1048576);
  EXPECT_TRUE(std::isnan(metrics[0].grad_norm));
  ASSERT_EQ(report.evals().size(), 1u);
  EXPECT_EQ(report.evals()[0].slice, "GPL-3");
  const std::vector<store::Event> events = report.TakeEvents();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].message, "training checkpoint at update 151 (interval)");
  EXPECT_EQ(report.finish()->model_sha256.hex, kSha);
}

// The worker's error event names what it was doing: the event's message says it.
TEST(WorkerReportTest, AnErrorsPhaseIsInItsEventsMessage) {
  WorkerReport report;
  report.Consume(R"({"event":"error","kind":"oom","phase":"eval","message":"budget exceeded"})",
                 kNow);
  report.Consume(R"({"event":"error","kind":"internal","message":"no phase"})", kNow);
  const std::vector<store::Event> events = report.TakeEvents();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].message, "oom in eval: budget exceeded");
  EXPECT_EQ(events[1].message, "internal: no phase");
  EXPECT_EQ(report.error()->phase, std::nullopt);
}

// Found by tests/fuzz/worker_report_fuzzer: value("reason", "") and its kin threw
// nlohmann's type_error out of Consume (and so out of the nightly cycle) when a field the
// daemon reads as a string had another type.
TEST(WorkerReportTest, AStringFieldOfAnotherTypeIsIgnoredNotThrown) {
  WorkerReport report;
  EXPECT_NO_THROW(report.Consume(R"({"event":"checkpoint","update":3,"reason":true})", kNow));
  EXPECT_NO_THROW(report.Consume(R"({"event":"warning","message":{"a":1}})", kNow));
  EXPECT_NO_THROW(report.Consume(R"({"event":"error","kind":7,"message":"out of memory"})", kNow));
  const std::vector<store::Event> events = report.TakeEvents();
  ASSERT_EQ(events.size(), 6u);
  EXPECT_EQ(events[0].message,
            "the worker's checkpoint event has fields of the wrong type, ignored: reason");
  EXPECT_EQ(events[1].message, "training checkpoint at update 3 ()");
  EXPECT_EQ(events[2].message,
            "the worker's warning event has fields of the wrong type, ignored: message");
  EXPECT_EQ(events[3].message, "");
  EXPECT_EQ(events[4].kind, "worker_protocol");
  EXPECT_EQ(events[4].message,
            "the worker's error event has fields of the wrong type, ignored: kind");
  EXPECT_EQ(events[5].message, ": out of memory");
  // The nightly cycle reads the typed error event: the bad field kept its default.
  EXPECT_EQ(report.error()->kind, "");
  EXPECT_EQ(report.error()->message, "out of memory");
}

// Found by tests/fuzz/worker_report_fuzzer: an eval whose slices are not objects with a
// string name threw; a number too large for an int was cast to one (undefined behaviour).
TEST(WorkerReportTest, MalformedSlicesAndOutOfRangeCountsAreIgnored) {
  WorkerReport report;
  report.Consume(R"({"event":"eval","update":2,"slices":[3,{"name":1},{"loss":1},{"name":"a"}]})",
                 kNow);
  report.Consume(R"({"event":"eval","update":2,"slices":"GPL-3"})", kNow);
  ASSERT_EQ(report.evals().size(), 1u);
  EXPECT_EQ(report.evals()[0].slice, "a");
  EXPECT_TRUE(std::isnan(report.evals()[0].loss));
  report.Consume(R"({"event":"start","updates":1e300,"resumed_from_update":-5})", kNow);
  EXPECT_EQ(report.updates(), 0);
  EXPECT_EQ(report.updates_done(), 0);
  report.Consume(R"({"event":"update","update":4294967296,"live_bytes":1e19})", kNow);
  EXPECT_EQ(report.updates_done(), 0);
  EXPECT_EQ(report.TakeMetrics().at(0).live_bytes, 0);
  report.Consume(R"({"event":"checkpoint","update":-1e300})", kNow);
  EXPECT_EQ(report.last_checkpoint_update(), 0);
}

// What the nightly cycle reads from the start and finish events with value(key, default)
// either has its documented type or is absent, so those reads cannot throw or overflow.
TEST(WorkerReportTest, StartAndFinishKeepOnlyFieldsOfTheirDocumentedType) {
  WorkerReport report;
  report.Consume(R"({"event":"start","software":{"torch_version":1.13,"blas":"openblas"},)"
                 R"("data":[],"effective_batch":"32","seed":1.5,"model":{"kind":"gpt"}})",
                 kNow);
  report.Consume(R"({"event":"finish","updates":-2147483648,"peak_bytes":1e30,)"
                 R"("throughput_method":null,"model_path":["/m.pt"],"elapsed_seconds":3,)"
                 R"("samples_per_second":null})",
                 kNow);
  const StartEvent& start = *report.start();
  EXPECT_EQ(start.software.blas, "openblas");
  EXPECT_EQ(start.software.torch_version, "");
  EXPECT_EQ(start.data.fingerprint, "");
  EXPECT_EQ(start.effective_batch, 0);
  EXPECT_EQ(start.seed, 0u);
  EXPECT_EQ(start.model.kind, "gpt");
  const FinishEvent& finish = *report.finish();
  EXPECT_EQ(finish.updates, 0);
  EXPECT_EQ(finish.peak_bytes, 0);
  EXPECT_EQ(finish.throughput_method, "");
  EXPECT_FALSE(finish.samples_per_second.has_value());  // documented: null when nothing trained
  EXPECT_EQ(finish.model_path, "");
  EXPECT_EQ(finish.elapsed_seconds, 3.0);
  const std::vector<store::Event> events = report.TakeEvents();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].message,
            "the worker's start event has fields of the wrong type, ignored: data, "
            "effective_batch, seed, software.torch_version");
  EXPECT_EQ(events[1].message,
            "the worker's finish event has fields of the wrong type, ignored: "
            "model_path, peak_bytes, throughput_method, updates");
  EXPECT_TRUE(Json::accept(events[1].details_json));
}

// The hash names the release file (releases/model-<sha>.pt): anything but 64 hex digits, a
// path for one, is dropped; a 64-bit seed keeps all its digits.
TEST(WorkerReportTest, AModelHashThatIsNotSixtyFourHexDigitsIsDroppedAndASeedKeepsItsDigits) {
  const std::string good(64, 'a');
  for (const std::string& bad : {std::string("../../etc/passwd"), std::string(63, 'a'),
                                 std::string(64, 'A'), std::string(63, 'a') + "/"}) {
    WorkerReport report;
    report.Consume(R"({"event":"finish","model_sha256":")" + bad + R"("})", kNow);
    EXPECT_TRUE(report.finish()->model_sha256.hex.empty()) << bad;
  }
  WorkerReport report;
  report.Consume(R"({"event":"start","seed":18446744073709551615})", kNow);
  report.Consume(R"({"event":"finish","model_sha256":")" + good + R"("})", kNow);
  EXPECT_EQ(report.finish()->model_sha256.hex, good);
  EXPECT_EQ(report.start()->seed, 18446744073709551615ULL);
}

TEST(WorkerReportTest, LinesThatAreNotEventsAreIgnored) {
  WorkerReport report;
  for (const char* line : {"", "not json", "[1,2]", R"({"event":5})", R"({"no_event":1})",
                           R"({"event":"update","update":)"}) {
    EXPECT_NO_THROW(report.Consume(line, kNow)) << line;
  }
  EXPECT_EQ(report.pending_metrics(), 0u);
  EXPECT_FALSE(report.start().has_value());
  EXPECT_TRUE(report.TakeEvents().empty());
}

}  // namespace
}  // namespace trainerd::daemon
