#include "data/tokens/learning_windows.h"

#include <algorithm>

namespace trainerd {

LearningWindows LearningWindows::Find(std::int64_t ids, int window,
                                      const std::function<bool(std::int64_t)>& learned) {
  LearningWindows found;
  const std::int64_t last_start = ids - window - 1;
  std::int64_t run_last = -1;  // the last start of the current run
  for (std::int64_t p = 1; p < ids; ++p) {
    if (!learned(p)) continue;
    // Id p is target t = p - s - 1 of the windows starting at s in [p - window, p - 1].
    const std::int64_t first = std::max<std::int64_t>(0, p - window);
    const std::int64_t last = std::min(p - 1, last_start);
    if (found.run_first_.empty() || first > run_last + 1) {
      found.run_first_.push_back(first);
      found.run_offset_.push_back(found.starts_);
      found.starts_ += last - first + 1;
    } else {
      found.starts_ += last - run_last;
    }
    run_last = last;
  }
  return found;
}

std::int64_t LearningWindows::Start(std::int64_t k) const {
  // The last run whose offset is at most k.
  const auto run = std::upper_bound(run_offset_.begin(), run_offset_.end(), k) - 1;
  const auto index = run - run_offset_.begin();
  return run_first_[static_cast<std::size_t>(index)] + (k - *run);
}

}  // namespace trainerd
