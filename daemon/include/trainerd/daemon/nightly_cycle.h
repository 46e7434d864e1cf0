// One nightly cycle (docs/daemon.md): the resolve step picks the config version, then attempts
// run until one ends the cycle, each a run record taken through the attempt steps
// (cycle_step.h: plan, ledger, parity, profile, train, judge, release); after an OOM, a crash,
// a leak or a refused plan the fallback decision (policy.h) picks the next attempt within the
// window; the report step writes the runs' pages.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "trainerd/daemon/cycle_step.h"

namespace trainerd::daemon {

struct CycleOutcome {
  // The cycle's last run succeeded: inside its window, no regression, through the gate.
  bool succeeded = false;
  bool released = false;              // its model became the current release
  std::vector<std::int64_t> run_ids;  // every run of the cycle, in order
  std::string summary;                // one line for logs
};

class NightlyCycle {
 public:
  // Everything referenced must outlive the cycle; `metrics` may be null. `metric_store` is a
  // second connection to the run store, for the training's update metrics (MetricWriter).
  // `attempt_steps`: what an attempt runs, in order (a test adds one).
  NightlyCycle(const DaemonConfig& config, store::Store& store, store::Store& metric_store,
               const Clock& clock, WorkerSupervisor& supervisor, FileStore& files,
               DaemonMetrics* metrics, std::function<void(const CycleProgress&)> on_progress,
               CycleSteps attempt_steps = DefaultAttemptSteps());
  ~NightlyCycle();

  // Runs the cycle of `window`. `trigger` says why ("schedule", "catch-up", "once",
  // "resume"); `resumes_run` is a run the cycle continues (interrupted by a daemon restart),
  // recorded as the first run's fallback_of.
  asio::awaitable<CycleOutcome> Run(Window window, std::string trigger,
                                    std::optional<std::int64_t> resumes_run);

 private:
  // One attempt: its run recorded, then the steps until one ends it; its end recorded.
  asio::awaitable<void> RunAttempt(CycleState& state, const Attempt& attempt,
                                   std::optional<std::int64_t> fallback_of);
  // Creates the run record (no plan yet) and marks it running; false when the store refuses.
  bool BeginRun(CycleState& state, std::optional<std::int64_t> fallback_of);

  CycleContext context_;
  std::unique_ptr<CycleStep> resolve_;
  CycleSteps attempt_steps_;
  std::unique_ptr<CycleStep> report_;
};

}  // namespace trainerd::daemon
