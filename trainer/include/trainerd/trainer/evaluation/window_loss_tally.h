// The loss of each held-out window of one slice, accumulated from the outputs the evaluation
// observes (the whole microbatch's, or one output chunk's positions at a time, in order), so
// that the daemon can take the evaluation's noise by window (spec/worker_protocol.h,
// WindowLosses). The terms are the job loss's: cross_entropy's per position whose target is
// not ignored, mse's per element. A module's own loss has none (what its outputs mean is the
// module's).
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "trainerd/trainer/spec/job_spec.h"
#include "trainerd/trainer/spec/worker_protocol.h"

namespace trainerd {

class WindowLossTally {
 public:
  // `windows` windows of `terms_per_window` targets each (a window's targets' element count).
  WindowLossTally(const LossSpec& loss, std::int64_t windows, std::int64_t terms_per_window);

  // The next positions' outputs and targets, as the job's loss reads them.
  void Add(const torch::Tensor& outputs, const torch::Tensor& targets);
  // None for a module's own loss, before every window was seen, or when a window's loss is
  // not finite (a diverged model: its slice's loss is not finite either, and judged so).
  std::optional<WindowLosses> Result() const;

 private:
  LossSpec loss_;
  std::int64_t terms_per_window_;
  std::int64_t seen_ = 0;  // target elements added so far
  torch::Tensor sums_;     // [windows], float64, on the first outputs' device
  torch::Tensor terms_;    // [windows], int64
};

}  // namespace trainerd
