// Commits a training run's update metrics on a thread of its own, through a connection to
// the run store that nothing else uses, so that the daemon's event loop (which also answers
// the control socket) never waits for a commit's fsync: a batch of metrics is a few
// milliseconds of fsync, and a request arriving meanwhile waited for it. Batches are
// committed in the order they were queued; Drain waits for them, so that a run's last
// metrics and its final record (Store::FinishRun on the loop's connection) stay in order.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "trainerd/common/status.h"
#include "trainerd/store/records.h"
#include "trainerd/store/store.h"

namespace trainerd::daemon {

class MetricWriter {
 public:
  // `store` must outlive the writer and be used by no other thread while it lives.
  explicit MetricWriter(store::Store& store);
  // Commits what is queued, then stops the thread.
  ~MetricWriter();
  MetricWriter(const MetricWriter&) = delete;
  MetricWriter& operator=(const MetricWriter&) = delete;

  // Queues one batch (Store::AppendMetrics); returns at once.
  void Append(std::int64_t run_id, std::vector<store::UpdateMetric> metrics);
  // Waits until every queued batch is committed or refused; returns the first refusal since
  // the last Drain (the later batches are still tried), or OK.
  Status Drain();

 private:
  void CommitUntilStopped();

  store::Store& store_;
  std::mutex mutex_;
  std::condition_variable queued_;
  std::condition_variable drained_;
  std::deque<std::pair<std::int64_t, std::vector<store::UpdateMetric>>> queue_;
  bool committing_ = false;
  bool stopping_ = false;
  Status first_error_;
  std::thread thread_;  // last: it starts once everything above exists
};

}  // namespace trainerd::daemon
