// The distribution of a model's predictions on one held-out slice, accumulated microbatch by
// microbatch during the evaluation (spec/worker_protocol.h, PredictionDistribution). A
// cross_entropy model: at each position whose target is not ignored, the entropy of its
// predicted distribution over log(classes) and its top-1 probability, each counted in
// kPredictionBins bins of [0, 1], and for at most kMaxCountedClasses classes the predicted
// class. An mse model: its outputs' mean and standard deviation. A module's own loss: nothing
// (what its outputs mean is the module's). The daemon compares two runs' distributions by
// their Jensen-Shannon divergence (common/divergence.h).
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "trainerd/trainer/spec/job_spec.h"
#include "trainerd/trainer/spec/worker_protocol.h"

namespace trainerd {

class PredictionTally {
 public:
  explicit PredictionTally(const LossSpec& loss) : loss_(loss) {}

  // One microbatch's outputs and targets (as the job's loss reads them). The probabilities
  // are taken over row chunks a quarter of the microbatch's positions, so the tally never
  // holds more than the loss itself did.
  void Add(const torch::Tensor& outputs, const torch::Tensor& targets);
  // None for a module's own loss or before any Add.
  std::optional<PredictionDistribution> Result() const;

 private:
  void AddProbabilities(const torch::Tensor& logits);  // [positions, classes]

  LossSpec loss_;
  std::vector<std::int64_t> entropy_ = std::vector<std::int64_t>(kPredictionBins);
  std::vector<std::int64_t> top1_ = std::vector<std::int64_t>(kPredictionBins);
  std::vector<std::int64_t> classes_;
  double sum_ = 0;
  double sum_of_squares_ = 0;
  std::int64_t count_ = 0;
};

}  // namespace trainerd
