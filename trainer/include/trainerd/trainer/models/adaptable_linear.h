// The linear layers a job may put low-rank adapters on (finetune: {method: lora};
// docs/model-state.md): AdaptableLinear, which the built-in GPT and the Hugging Face decoders use
// for every linear layer but the LM head, GPT-2's Conv1D, and a plugin's own layers where it
// builds them from AdaptableLinear. Without an adapter such a layer is the plain layer: same
// parameters, names, initialisation and arithmetic.
#pragma once

#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include <optional>

#include "trainerd/trainer/semantics/sample_dropout.h"
#include "trainerd/trainer/spec/job_spec.h"

namespace trainerd {

// An adapter on one layer, as `peft` defines LoRA: the layer's output gains
// lora_B(lora_A(dropout(x))) * alpha / rank. lora_A ([rank, in], nn.Linear's initialisation,
// which is peft's) and lora_B ([out, rank], zeros: the layer starts unchanged) are registered
// on the layer itself, so that their names are peft's ("...q_proj.lora_A.weight").
class LowRankAdapter {
 public:
  // The adapter's dropout draws the trainer's split-invariant masks at dropout site `site`.
  LowRankAdapter(torch::nn::Module& layer, std::int64_t in, std::int64_t out,
                 const FinetuneSpec& spec, int site);
  torch::Tensor forward(const torch::Tensor& x);
  // alpha / rank x B A: [out, in], what merging adds to an [out, in] weight.
  torch::Tensor Delta() const;
  // Unregisters lora_A, lora_B and the dropout from `layer`.
  void Remove(torch::nn::Module& layer);

 private:
  torch::nn::Linear a_{nullptr}, b_{nullptr};
  SampleDropout dropout_{nullptr};
  double scaling_;
};

// A layer that takes an adapter. Implementations add adapter_->forward(x) to their output
// when one is attached, and give the module the adapter registers on and their stored weight.
class AdaptableLayer {
 public:
  virtual ~AdaptableLayer() = default;
  // REQUIRES: no adapter yet.
  void AttachAdapter(const FinetuneSpec& spec, int site);
  // Folds the adapter into the weight and removes it: the layer then computes what it
  // computed with the adapter (up to rounding), as plain parameters. No-op without one.
  void MergeAdapter();
  // Stores the weight as `dtype` (a frozen base's finetune.base_dtype).
  void StoreWeightAs(torch::ScalarType dtype);
  // True when the layer stores its weight [in, out] (GPT-2's Conv1D), peft's fan_in_fan_out.
  virtual bool fan_in_fan_out() const { return false; }
  bool has_adapter() const { return adapter_.has_value(); }

 protected:
  // The module the adapter's parameters are registered on: the layer itself.
  virtual torch::nn::Module& layer_module() = 0;
  // The weight, [out, in] or, with fan_in_fan_out, [in, out].
  virtual torch::Tensor& stored_weight() = 0;

  std::optional<LowRankAdapter> adapter_;
};

// x W^T + b for a frozen W stored narrower than x (finetune.base_dtype: bf16). Under autocast
// the product takes W as it is; otherwise W is widened to x's dtype for the product and again
// in backward, never kept wide. REQUIRES: W and b (when defined) need no gradient.
torch::Tensor LinearOfStoredWeight(const torch::Tensor& x, const torch::Tensor& weight,
                                   const torch::Tensor& bias);

// torch::nn::Linear (the same parameters, names and initialisation) that takes an adapter.
class AdaptableLinearImpl : public torch::nn::LinearImpl, public AdaptableLayer {
 public:
  using LinearImpl::LinearImpl;
  torch::Tensor forward(const torch::Tensor& x);

 protected:
  torch::nn::Module& layer_module() override { return *this; }
  torch::Tensor& stored_weight() override { return weight; }
};
TORCH_MODULE(AdaptableLinear);

}  // namespace trainerd
