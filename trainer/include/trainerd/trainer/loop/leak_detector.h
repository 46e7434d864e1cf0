// Detects memory that keeps growing across optimizer updates: live bytes sampled at the same
// point of every update must come back to the same level; a retained tensor holding a graph
// alive (the classic `total += loss` without .item()) shows as growth at every sample.
// Not thread-safe.
#pragma once

#include <cstdint>

namespace trainerd {

struct LeakDetectorOptions {
  int warmup_samples = 2;  // the first samples allocate optimizer state and are skipped
  int sustained = 3;       // consecutive growing samples above tolerance that make a leak
  std::int64_t tolerance_bytes = 1 << 20;
};

class LeakDetector {
 public:
  explicit LeakDetector(LeakDetectorOptions options = {}) : options_(options) {}

  // Feeds one sample; true once growth over the baseline (the first sample after warm-up)
  // exceeded the tolerance and grew at `sustained` consecutive samples.
  bool Observe(std::int64_t live_bytes);
  std::int64_t growth_bytes() const { return last_ - baseline_; }

 private:
  LeakDetectorOptions options_;
  int samples_ = 0;
  int growing_ = 0;
  std::int64_t baseline_ = 0;
  std::int64_t last_ = 0;
};

}  // namespace trainerd
