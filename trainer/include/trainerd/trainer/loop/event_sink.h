// Where the trainer's progress goes. Events are JSON objects with an "event" field:
// start, update, eval, checkpoint, finish, error (schema: docs/trainer-run.md).
// Implementations are not thread-safe; the training loop emits from one thread.
#pragma once

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace trainerd {

class EventSink {
 public:
  virtual ~EventSink() = default;
  virtual void Emit(const nlohmann::json& event) = 0;
};

// Drops every event: for internal runs (parity, probes, ledgers) whose progress nobody reads.
class NullEventSink : public EventSink {
 public:
  void Emit(const nlohmann::json& /*event*/) override {}
};

// One compact JSON object per line, flushed after each: for pipes (the daemon) and logs.
class JsonLinesSink : public EventSink {
 public:
  explicit JsonLinesSink(std::FILE* out) : out_(out) {}
  void Emit(const nlohmann::json& event) override;

 private:
  std::FILE* out_;
};

// A human view for a terminal: a header, a redrawn progress bar (update n/N, loss,
// samples/s, ETA), and one line per eval, checkpoint, finish or error.
class TerminalProgress : public EventSink {
 public:
  explicit TerminalProgress(std::FILE* out) : out_(out) {}
  void Emit(const nlohmann::json& event) override;

 private:
  void EndBar();

  std::FILE* out_;
  bool bar_open_ = false;
};

}  // namespace trainerd
