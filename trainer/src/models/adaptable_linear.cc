#include "trainerd/trainer/models/adaptable_linear.h"

#include <torch/torch.h>

#include "trainerd/trainer/device/torch_compat.h"

namespace trainerd {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

class WidenedLinear : public torch::autograd::Function<WidenedLinear> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight) {
    ctx->save_for_backward({weight});
    return torch::nn::functional::linear(x, weight.to(x.scalar_type()));
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const torch::Tensor weight = ctx->get_saved_variables()[0];
    const torch::Tensor& grad = grad_outputs[0];
    return {grad.matmul(weight.to(grad.scalar_type())), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor LinearOfStoredWeight(const torch::Tensor& x, const torch::Tensor& weight,
                                   const torch::Tensor& bias) {
  if (weight.scalar_type() == x.scalar_type() || compat::GetAutocast(x.device().type()).enabled) {
    return torch::nn::functional::linear(x, weight, bias);
  }
  const torch::Tensor product = WidenedLinear::apply(x, weight);
  return bias.defined() ? product + bias : product;
}

LowRankAdapter::LowRankAdapter(torch::nn::Module& layer, std::int64_t in, std::int64_t out,
                               const FinetuneSpec& spec, int site)
    : scaling_(spec.alpha / spec.rank) {
  a_ = layer.register_module(
      "lora_A", torch::nn::Linear(torch::nn::LinearOptions(in, spec.rank).bias(false)));
  b_ = layer.register_module(
      "lora_B", torch::nn::Linear(torch::nn::LinearOptions(spec.rank, out).bias(false)));
  dropout_ = layer.register_module("lora_dropout", SampleDropout(spec.dropout, site));
  torch::NoGradGuard no_grad;
  b_->weight.zero_();
}

torch::Tensor LowRankAdapter::forward(const torch::Tensor& x) {
  return b_->forward(a_->forward(dropout_->forward(x))) * scaling_;
}

torch::Tensor LowRankAdapter::Delta() const { return torch::mm(b_->weight, a_->weight) * scaling_; }

void LowRankAdapter::Remove(torch::nn::Module& layer) {
  for (const char* name : {"lora_A", "lora_B", "lora_dropout"}) layer.unregister_module(name);
}

void AdaptableLayer::AttachAdapter(const FinetuneSpec& spec, int site) {
  TORCH_CHECK(!adapter_, "the layer has an adapter already");
  const torch::Tensor& weight = stored_weight();
  const int in_dim = fan_in_fan_out() ? 0 : 1;
  adapter_.emplace(layer_module(), weight.size(in_dim), weight.size(1 - in_dim), spec, site);
}

void AdaptableLayer::MergeAdapter() {
  if (!adapter_) return;
  torch::NoGradGuard no_grad;
  const torch::Tensor delta = adapter_->Delta();
  torch::Tensor& weight = stored_weight();
  weight.set_data(weight.to(torch::kFloat) + (fan_in_fan_out() ? delta.t() : delta));
  adapter_->Remove(layer_module());
  adapter_.reset();
}

void AdaptableLayer::StoreWeightAs(torch::ScalarType dtype) {
  torch::Tensor& weight = stored_weight();
  weight.set_data(weight.to(dtype));
}

torch::Tensor AdaptableLinearImpl::forward(const torch::Tensor& x) {
  torch::Tensor y = LinearOfStoredWeight(x, weight, bias);
  if (adapter_) y = y + adapter_->forward(x);
  return y;
}

}  // namespace trainerd
