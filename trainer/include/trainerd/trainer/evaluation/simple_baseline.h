// The simple baseline a model must beat on every held-out slice before it is released
// (docs/daemon.md, "The release gate"): one constant prediction, fitted on the training data,
// scored with the job's own loss. For cross_entropy it is the frequency of each class among
// the training targets (the unigram distribution of a language model, the class prior of a
// classifier), add-k smoothed over the model's classes, (count + k) / (terms + k x classes),
// with the k in [1e-4, 100] that scores best on the slice it is scored on: the best a model
// that learned only the class frequencies of its training data does, within a margin the gate
// states (regression.baseline_margin); for mse it is the training targets' mean, element by
// element. A module's own loss has no baseline: what its outputs mean is the module's.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "trainerd/trainer/data/dataset.h"
#include "trainerd/trainer/semantics/loss.h"

namespace trainerd {

class SimpleBaseline {
 public:
  // Fitted on the first samples of the training stream for `seed`, as `format` reads them:
  // kFitTerms loss terms, kMaxFitSamples samples or kMaxFitInputs input elements (wide rows),
  // whichever comes first. `classes`: the outputs' last dimension (cross_entropy). None for
  // LossKind::kModule.
  static std::optional<SimpleBaseline> Fit(const LossSpec& loss, const Dataset& data,
                                           SampleFormat format, std::uint64_t seed,
                                           std::int64_t classes);
  static constexpr std::int64_t kFitTerms = std::int64_t{1} << 20;
  static constexpr std::int64_t kMaxFitSamples = 16384;
  static constexpr std::int64_t kMaxFitInputs = std::int64_t{1} << 26;

  // The baseline's loss on `targets` (the job loss's terms: ignored targets carry none), as a
  // sum and its term count, on the targets' device; cross_entropy's with the k best on them.
  LossTerms Loss(const torch::Tensor& targets) const;
  // "class frequencies of 1048576 training targets", "the mean of 4096 training rows".
  const std::string& description() const { return description_; }

 private:
  LossSpec loss_;
  torch::Tensor counts_;  // cross_entropy: each class's training targets, [classes], float64
  std::int64_t terms_ = 0;
  torch::Tensor mean_;  // mse: one target row, float64
  std::string description_;
};

}  // namespace trainerd
