// Comparisons of two models' parameters or gradients, by parameter name.
#pragma once

#include <torch/torch.h>

#include <algorithm>
#include <string>

#include "trainerd/trainer/loop/gradient_accumulation.h"

namespace trainerd::testing {

// Largest |a - b| over the elements of two tensors of one shape.
inline double MaxAbsDifference(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

// Largest |a - b| over every element of every parameter's gradient. A gradient present on
// one side only counts as infinitely different.
inline double MaxGradDifference(const torch::nn::Module& a, const torch::nn::Module& b) {
  double worst = 0;
  auto other = b.named_parameters();
  for (const auto& item : a.named_parameters()) {
    const torch::Tensor& ga = item.value().grad();
    const torch::Tensor& gb = other[item.key()].grad();
    if (ga.defined() != gb.defined()) return std::numeric_limits<double>::infinity();
    if (ga.defined()) worst = std::max(worst, MaxAbsDifference(ga, gb));
  }
  return worst;
}

inline double MaxParameterDifference(const torch::nn::Module& a, const torch::nn::Module& b) {
  double worst = 0;
  auto other = b.named_parameters();
  for (const auto& item : a.named_parameters()) {
    worst = std::max(worst, MaxAbsDifference(item.value(), other[item.key()]));
  }
  return worst;
}

inline double GlobalGradNorm(const torch::nn::Module& m) {
  return trainerd::GlobalGradNorm(m.parameters());
}

}  // namespace trainerd::testing
