// How much of an evaluation's loss is noise: the held-out windows are a sample, and another
// sample of the same data would give another loss. Taken by window (a window's positions are
// correlated, the windows are the independent units), from the loss of each window the worker
// reports (WindowLosses, trainer/spec/worker_protocol.h). The release gate judges a slice's
// loss against the current release's beyond this noise (policy.h, ReleaseGate).
#pragma once

#include <optional>
#include <string>

#include "trainerd/trainer/spec/worker_protocol.h"

namespace trainerd::daemon {

// The windows of a stored evaluation (store::SliceEval::windows_json); none for "" (an
// evaluation recorded without them), text that is not their JSON, or sums and terms of
// different lengths.
std::optional<WindowLosses> ParseWindowLosses(const std::string& json);

// StandardError of a stored evaluation's windows; none without them.
std::optional<double> StoredStandardError(const std::string& windows_json);

// The standard error of the loss sum(sums) / sum(terms): the ratio estimator's linearized
// variance over the windows, n/(n-1) * sum_w (s_w - loss * t_w)^2 / (sum_w t_w)^2 (with
// equal terms per window, the sample standard deviation of the windows' losses over sqrt(n)).
// None with fewer than two windows that hold terms.
std::optional<double> StandardError(const WindowLosses& windows);

// The standard error of loss(a) - scale * loss(b). Paired when `same_windows` (b was evaluated
// on the held-out windows a was) and their terms agree window by window: the standard error
// of the windows' differences, a_w - scale * b_w, in which what the windows share cancels.
// Otherwise the two as independent samples: sqrt(se(a)^2 + scale^2 * se(b)^2).
struct DifferenceNoise {
  double standard_error = 0;
  bool paired = false;
};
std::optional<DifferenceNoise> DifferenceStandardError(const WindowLosses& a, const WindowLosses& b,
                                                       double scale, bool same_windows);

// z such that a standard normal variable is below it with probability `confidence`, in
// (0.5, 1): 1.645 for 0.95.
double NormalQuantile(double confidence);

}  // namespace trainerd::daemon
