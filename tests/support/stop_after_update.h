// An EventSink that asks a run to stop (TrainerOptions::stop_requested) once it has reported a
// given update: an interrupted run, as SIGTERM makes one, for resume tests.
#pragma once

#include <atomic>
#include <variant>

#include "trainerd/trainer/loop/event_sink.h"

namespace trainerd::testing {

class StopAfterUpdate : public EventSink {
 public:
  StopAfterUpdate(int at, std::atomic<bool>* stop) : at_(at), stop_(stop) {}
  void Emit(const WorkerEvent& event) override {
    const auto* update = std::get_if<UpdateEvent>(&event);
    if (update != nullptr && update->update == at_) *stop_ = true;
  }

 private:
  int at_;
  std::atomic<bool>* stop_;
};

}  // namespace trainerd::testing
