#include "trainerd/daemon/metric_writer.h"

namespace trainerd::daemon {

MetricWriter::MetricWriter(store::Store& store)
    : store_(store), thread_([this] { CommitUntilStopped(); }) {}

MetricWriter::~MetricWriter() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  queued_.notify_one();
  thread_.join();
}

void MetricWriter::Append(std::int64_t run_id, std::vector<store::UpdateMetric> metrics) {
  {
    std::lock_guard lock(mutex_);
    queue_.emplace_back(run_id, std::move(metrics));
  }
  queued_.notify_one();
}

Status MetricWriter::Drain() {
  std::unique_lock lock(mutex_);
  drained_.wait(lock, [this] { return queue_.empty() && !committing_; });
  return std::exchange(first_error_, Status::Ok());
}

void MetricWriter::CommitUntilStopped() {
  std::unique_lock lock(mutex_);
  while (true) {
    queued_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, with everything committed
    auto [run_id, metrics] = std::move(queue_.front());
    queue_.pop_front();
    committing_ = true;
    lock.unlock();
    Status status = store_.AppendMetrics(run_id, metrics);
    lock.lock();
    committing_ = false;
    if (!status.ok() && first_error_.ok()) first_error_ = std::move(status);
    if (queue_.empty()) drained_.notify_all();
  }
}

}  // namespace trainerd::daemon
