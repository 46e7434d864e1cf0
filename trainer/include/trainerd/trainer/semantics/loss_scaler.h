// Dynamic loss scaling for fp16 (LibTorch 1.13 has no GradScaler). The loss is multiplied by
// the scale before backward; before clipping, gradients are divided by it and checked for
// inf/NaN. An overflow skips the optimizer step and multiplies the scale by `backoff`; after
// `growth_interval` clean updates in a row the scale grows by `growth`. Same defaults as
// PyTorch's GradScaler. Not thread-safe. Its state is part of the training checkpoint.
#pragma once

#include <torch/types.h>

#include <vector>

namespace trainerd {

struct LossScalerOptions {
  double initial_scale = 65536.0;
  double growth = 2.0;
  double backoff = 0.5;
  int growth_interval = 2000;  // clean updates before the scale grows
};

class DynamicLossScaler {
 public:
  explicit DynamicLossScaler(LossScalerOptions options = {});

  torch::Tensor Scale(const torch::Tensor& loss) const { return loss * scale_; }
  // Divides every defined gradient by the scale; true when any is inf or NaN.
  bool UnscaleAndCheckOverflow(const std::vector<torch::Tensor>& parameters) const;
  // Call once per optimizer update with the result of UnscaleAndCheckOverflow.
  void Update(bool overflow);

  double scale() const { return scale_; }
  int clean_updates() const { return clean_updates_; }
  // For checkpoints: the whole state is (scale, clean_updates).
  void Restore(double scale, int clean_updates);

 private:
  LossScalerOptions options_;
  double scale_;
  int clean_updates_ = 0;
};

}  // namespace trainerd
