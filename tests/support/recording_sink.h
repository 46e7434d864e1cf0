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
  std::vector<nlohmann::json> events;
};

}  // namespace trainerd::testing
