// Bytes of the model's own state, counted exactly from its tensors: what the memory ledger
// reports as gradients and optimizer state, and what the trainer reports at an OOM or a leak.
#pragma once

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <vector>

namespace trainerd {

// A tensor's bytes; 0 when it is undefined.
std::int64_t TensorBytes(const torch::Tensor& t);

// Bytes of the gradients an update holds: one per trainable parameter, counted from the
// parameters, so the figure is the same before the first backward or after a release.
std::int64_t GradientBytes(const torch::nn::Module& model);
// The same for `parameters` only (a rank's shard under ZeRO stage 2).
std::int64_t GradientBytes(const std::vector<torch::Tensor>& parameters);

// Bytes of AdamW's per-parameter state (exp_avg, exp_avg_sq, max_exp_avg_sq when amsgrad).
std::int64_t AdamWStateBytes(const torch::optim::Optimizer& optimizer);

}  // namespace trainerd
