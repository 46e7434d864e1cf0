#include "trainerd/trainer/semantics/loss_scaler.h"

#include <torch/torch.h>

namespace trainerd {

DynamicLossScaler::DynamicLossScaler(LossScalerOptions options)
    : options_(options), scale_(options.initial_scale) {}

bool DynamicLossScaler::UnscaleAndCheckOverflow(
    const std::vector<torch::Tensor>& parameters) const {
  torch::NoGradGuard no_grad;
  bool overflow = false;
  for (const torch::Tensor& p : parameters) {
    torch::Tensor grad = p.grad();
    if (!grad.defined()) continue;
    grad.div_(scale_);
    overflow = overflow || !torch::isfinite(grad).all().item<bool>();
  }
  return overflow;
}

void DynamicLossScaler::Update(bool overflow) {
  if (overflow) {
    scale_ *= options_.backoff;
    clean_updates_ = 0;
  } else if (++clean_updates_ >= options_.growth_interval) {
    scale_ *= options_.growth;
    clean_updates_ = 0;
  }
}

void DynamicLossScaler::Restore(double scale, int clean_updates) {
  scale_ = scale;
  clean_updates_ = clean_updates;
}

}  // namespace trainerd
