// A small MLP classifier: `layers` hidden blocks of Linear [-> BatchNorm1d] -> GELU ->
// Dropout, then a Linear head. With BatchNorm it is the model that shows where gradient
// accumulation is not equivalent to a large batch (statistics are per microbatch).
#pragma once

#include <torch/torch.h>

#include <vector>

#include "models/mlp/mlp_spec.h"
#include "trainerd/trainer/models/model.h"

namespace trainerd {

class MlpClassifier : public TrainableModel {
 public:
  MlpClassifier(const MlpOptions& options, std::int64_t in_features, std::int64_t classes);

  torch::Tensor forward(const torch::Tensor& features) override;  // [B, in] -> [B, classes]
  SampleFormat sample_format() const override { return SampleFormat::kSliceOfWindow; }
  int num_blocks() const override { return static_cast<int>(blocks_.size()); }
  bool has_batch_statistics() const override { return options_.batch_norm; }
  std::optional<FlopsPerSample> TrainingFlops() const override;  // 6 x parameters

  torch::nn::Sequential& block(int index) { return blocks_.at(static_cast<std::size_t>(index)); }

 private:
  MlpOptions options_;
  std::vector<torch::nn::Sequential> blocks_;
  torch::nn::Linear head_{nullptr};
};

}  // namespace trainerd
