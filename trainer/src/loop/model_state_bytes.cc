#include "trainerd/trainer/loop/model_state_bytes.h"

#include <torch/optim/adamw.h>

namespace trainerd {

std::int64_t TensorBytes(const torch::Tensor& t) {
  return t.defined() ? static_cast<std::int64_t>(t.nbytes()) : 0;
}

std::int64_t GradientBytes(const torch::nn::Module& model) {
  return GradientBytes(model.parameters());
}

std::int64_t GradientBytes(const std::vector<torch::Tensor>& parameters) {
  std::int64_t total = 0;
  for (const auto& p : parameters) {
    if (p.requires_grad()) total += TensorBytes(p);
  }
  return total;
}

std::int64_t AdamWStateBytes(const torch::optim::Optimizer& optimizer) {
  std::int64_t total = 0;
  for (const auto& entry : optimizer.state()) {
    const auto& state = static_cast<const torch::optim::AdamWParamState&>(*entry.second);
    total += TensorBytes(state.exp_avg()) + TensorBytes(state.exp_avg_sq()) +
             TensorBytes(state.max_exp_avg_sq());
  }
  return total;
}

}  // namespace trainerd
