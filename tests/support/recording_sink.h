// An EventSink that keeps every event as the worker protocol writes it (JSON), for assertions
// on what the trainer reported.
#pragma once

#include <string>
#include <vector>

#include "trainerd/trainer/loop/event_sink.h"

namespace trainerd::testing {

class RecordingSink : public EventSink {
 public:
  void Emit(const WorkerEvent& event) override { events.push_back(ToJson(event)); }
  // Every event of one kind ("update", "eval", ...), in order.
  std::vector<nlohmann::json> Of(const std::string& kind) const {
    std::vector<nlohmann::json> out;
    for (const auto& e : events) {
      if (e["event"] == kind) out.push_back(e);
    }
    return out;
  }
  // The warnings about the job, leaving out those about the machine the test runs on
  // (blas_below_cpu, peak_below_isa: an OpenBLAS on Prescott kernels gives both).
  std::vector<nlohmann::json> JobWarnings() const {
    std::vector<nlohmann::json> out;
    for (const auto& e : Of("warning")) {
      if (e["kind"] != "blas_below_cpu" && e["kind"] != "peak_below_isa") out.push_back(e);
    }
    return out;
  }
  std::vector<nlohmann::json> events;
};

}  // namespace trainerd::testing
