// Where the trainer's progress goes: the worker protocol's events (spec/worker_protocol.h),
// as typed values. Implementations are not thread-safe; the training loop emits from one
// thread.
#pragma once

#include <cstdio>

#include "trainerd/trainer/spec/worker_protocol.h"

namespace trainerd {

class EventSink {
 public:
  virtual ~EventSink() = default;
  virtual void Emit(const WorkerEvent& event) = 0;
};

// Drops every event: for internal runs (parity, probes, ledgers) whose progress nobody reads.
class NullEventSink : public EventSink {
 public:
  void Emit(const WorkerEvent& /*event*/) override {}
};

// One compact JSON object per line, flushed after each: for pipes (the daemon) and logs.
class JsonLinesSink : public EventSink {
 public:
  explicit JsonLinesSink(std::FILE* out) : out_(out) {}
  void Emit(const WorkerEvent& event) override;

 private:
  std::FILE* out_;
};

// A human view for a terminal: a header, a redrawn progress bar (update n/N, loss,
// samples/s, ETA), and one line per eval, checkpoint, finish, warning or error.
class TerminalProgress : public EventSink {
 public:
  explicit TerminalProgress(std::FILE* out) : out_(out) {}
  void Emit(const WorkerEvent& event) override;

 private:
  void Print(const StartEvent& start);
  void Print(const UpdateEvent& update);
  void Print(const EvalEvent& eval);
  void Print(const CheckpointEvent& checkpoint);
  void Print(const FinishEvent& finish);
  void Print(const WarningEvent& warning);
  void Print(const ErrorEvent& error);
  void Print(const PlanEvent& plan);
  void EndBar();

  std::FILE* out_;
  bool bar_open_ = false;
};

}  // namespace trainerd
