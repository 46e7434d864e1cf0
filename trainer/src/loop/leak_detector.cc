#include "trainerd/trainer/loop/leak_detector.h"

namespace trainerd {

bool LeakDetector::Observe(std::int64_t live_bytes) {
  ++samples_;
  if (samples_ <= options_.warmup_samples) return false;
  if (samples_ == options_.warmup_samples + 1) {
    baseline_ = last_ = live_bytes;
    return false;
  }
  const bool grew = live_bytes > last_;
  last_ = live_bytes;
  growing_ = grew && live_bytes - baseline_ > options_.tolerance_bytes ? growing_ + 1 : 0;
  return growing_ >= options_.sustained;
}

}  // namespace trainerd
