// FusedAdamW (loop/fused_adamw.h) is AdamW: from the same parameters and gradients its steps
// give torch::optim::AdamW's parameters and state within fp32 rounding, with weight decay and
// bias correction over several steps, leaving a parameter without a gradient untouched, and its
// state saves and loads as AdamW's.
#include "loop/fused_adamw.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <sstream>
#include <string>
#include <type_traits>

namespace trainerd {
namespace {

std::vector<torch::Tensor> Parameters() {
  torch::manual_seed(7);
  return {torch::randn({300, 17}).requires_grad_(), torch::randn({1000}).requires_grad_(),
          torch::randn({5, 4, 3}).requires_grad_(), torch::randn({8}).requires_grad_()};
}

std::vector<torch::Tensor> Clones(const std::vector<torch::Tensor>& tensors) {
  std::vector<torch::Tensor> out;
  for (const torch::Tensor& t : tensors) out.push_back(t.detach().clone().requires_grad_());
  return out;
}

// A parameter's AdamW state: LibTorch 1.x keys it by the tensor's address as a string.
template <typename Optimizer>
const torch::optim::AdamWParamState& StateOf(Optimizer& optimizer, const torch::Tensor& parameter) {
  auto& state = optimizer.state();
  using Key = typename std::decay_t<decltype(state)>::key_type;
  Key key;
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream address;  // as c10::guts::to_string writes it
    address << parameter.unsafeGetTensorImpl();
    key = address.str();
  } else {
    key = parameter.unsafeGetTensorImpl();
  }
  return static_cast<const torch::optim::AdamWParamState&>(*state.at(key));
}

double RelativeDifference(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).abs().max().item<double>() / std::max(b.abs().max().item<double>(), 1e-30);
}

TEST(FusedAdamWTest, ItsStepsAreAdamWs) {
  const std::vector<torch::Tensor> start = Parameters();
  std::vector<torch::Tensor> mine = Clones(start), reference = Clones(start);
  const auto options =
      torch::optim::AdamWOptions(3e-3).betas({0.9, 0.95}).weight_decay(0.1).eps(1e-8);
  FusedAdamW fused(mine, options);
  torch::optim::AdamW plain(reference, options);
  for (int step = 0; step < 6; ++step) {
    for (std::size_t i = 0; i + 1 < start.size(); ++i) {  // the last has no gradient
      const torch::Tensor grad = torch::randn_like(start[i]) * (step + 1);
      mine[i].mutable_grad() = grad.clone();
      reference[i].mutable_grad() = grad.clone();
    }
    fused.step();
    plain.step();
  }
  for (std::size_t i = 0; i < start.size(); ++i) {
    EXPECT_LE(RelativeDifference(mine[i], reference[i]), 1e-6) << "parameter " << i;
    if (i + 1 < start.size()) {
      EXPECT_FALSE(torch::equal(mine[i], start[i])) << i;
    }
  }
  EXPECT_TRUE(torch::equal(mine.back(), start.back())) << "no gradient, no step";
  for (std::size_t i = 0; i + 1 < start.size(); ++i) {
    const torch::optim::AdamWParamState& a = StateOf(fused, mine[i]);
    const torch::optim::AdamWParamState& b = StateOf(plain, reference[i]);
    EXPECT_EQ(a.step(), b.step());
    EXPECT_LE(RelativeDifference(a.exp_avg(), b.exp_avg()), 1e-6) << i;
    EXPECT_LE(RelativeDifference(a.exp_avg_sq(), b.exp_avg_sq()), 1e-6) << i;
  }
  // Saved and loaded as AdamW: a fresh one continues where this one stopped.
  std::stringstream archive;
  torch::save(fused, archive);
  std::vector<torch::Tensor> again = Clones(mine);
  FusedAdamW loaded(again, options);
  torch::load(loaded, archive);
  for (std::size_t i = 0; i + 1 < start.size(); ++i) {
    const torch::Tensor grad = torch::randn_like(start[i]);
    mine[i].mutable_grad() = grad.clone();
    again[i].mutable_grad() = grad.clone();
  }
  fused.step();
  loaded.step();
  for (std::size_t i = 0; i < start.size(); ++i) {
    EXPECT_TRUE(torch::allclose(mine[i], again[i], 0, 0)) << "after loading, parameter " << i;
  }
}

}  // namespace
}  // namespace trainerd
