// GPT2LMHeadModel as `transformers` defines it (models/gpt2/modeling_gpt2.py is the spec):
// token and learned position embeddings, blocks of LayerNorm, causal self-attention through
// one fused q/k/v projection, LayerNorm and a GELU MLP, each with a residual; a final
// LayerNorm and the head tied to the token embedding. Its linear layers are GPT-2's Conv1D,
// weights stored [in, out] (transposed against nn.Linear), as the checkpoints hold them.
// Names are the Hugging Face ones ("transformer.h.0.attn.c_attn.weight"). Each block is a
// plan's block; the three dropouts (embd_pdrop, attn_pdrop, resid_pdrop) are the trainer's
// split-invariant dropout.
#pragma once

#include <torch/torch.h>

#include "models/hf/hf_model.h"
#include "trainerd/trainer/models/adaptable_linear.h"
#include "trainerd/trainer/semantics/sample_dropout.h"

namespace trainerd {

// x W + b with W [in, out]; takes an adapter as peft does (fan_in_fan_out).
class Conv1DImpl : public torch::nn::Module, public AdaptableLayer {
 public:
  Conv1DImpl(std::int64_t in, std::int64_t out);
  torch::Tensor forward(const torch::Tensor& x);
  bool fan_in_fan_out() const override { return true; }

 protected:
  torch::nn::Module& layer_module() override { return *this; }
  torch::Tensor& stored_weight() override { return weight_; }

 private:
  torch::Tensor weight_, bias_;
};
TORCH_MODULE(Conv1D);

// Dropout sites `site` (attention weights) and `site + 1` (its output).
class Gpt2AttentionImpl : public torch::nn::Module {
 public:
  Gpt2AttentionImpl(const HfDecoderConfig& config, int site);
  // `first`: each query's first visible key (visible_keys.h; undefined: all before it).
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& first);

 private:
  std::int64_t heads_;
  Conv1D c_attn_{nullptr}, c_proj_{nullptr};
  SampleDropout attn_dropout_{nullptr}, resid_dropout_{nullptr};
};
TORCH_MODULE(Gpt2Attention);

// Dropout site `site` (its output).
class Gpt2MlpImpl : public torch::nn::Module {
 public:
  Gpt2MlpImpl(const HfDecoderConfig& config, int site);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  bool tanh_gelu_;  // gelu_new, gelu_pytorch_tanh; exact for gelu
  Conv1D c_fc_{nullptr}, c_proj_{nullptr};
  SampleDropout dropout_{nullptr};
};
TORCH_MODULE(Gpt2Mlp);

// Dropout sites `site` to `site + 2`.
class Gpt2BlockImpl : public torch::nn::Module {
 public:
  static constexpr int kDropoutSites = 3;
  Gpt2BlockImpl(const HfDecoderConfig& config, int site);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& first);

 private:
  torch::nn::LayerNorm ln_1_{nullptr}, ln_2_{nullptr};
  Gpt2Attention attn_{nullptr};
  Gpt2Mlp mlp_{nullptr};
};
TORCH_MODULE(Gpt2Block);

// The "transformer." part.
class Gpt2BackboneImpl : public torch::nn::Module {
 public:
  explicit Gpt2BackboneImpl(const HfDecoderConfig& config);
  torch::nn::Embedding wte{nullptr}, wpe{nullptr};
  SampleDropout drop{nullptr};  // site 0
  std::vector<Gpt2Block> h;
  torch::nn::LayerNorm ln_f{nullptr};
};
TORCH_MODULE(Gpt2Backbone);

class Gpt2Lm : public HfModel {
 public:
  // Parameters as LibTorch's modules initialise them: HfWeights::LoadInto fills them.
  Gpt2Lm(const HfDecoderConfig& config, int block_size, std::string folder);

  torch::Tensor Hidden(const torch::Tensor& tokens) override;  // [B, T] -> [B, T, hidden]
  int num_blocks() const override { return static_cast<int>(transformer_->h.size()); }
  // HfModel::Flops, the position embedding not multiplying either.
  std::optional<FlopsPerSample> TrainingFlops() const override;
  // Besides a tied head: the causal-mask buffers older checkpoints hold (h.N.attn.bias,
  // h.N.attn.masked_bias), with or without the "transformer." prefix.
  std::vector<std::string> IgnoredWeights() const override;
  // The Hub's GPT-2 checkpoints name the backbone's tensors without "transformer.".
  std::string OptionalPrefix() const override { return "transformer."; }

 private:
  Gpt2Backbone transformer_{nullptr};
  torch::nn::Linear lm_head() const override { return lm_head_; }
  torch::Tensor input_embedding() const override { return transformer_->wte->weight; }
  torch::nn::Linear lm_head_{nullptr};  // none when tied (GPT-2's default)
};

}  // namespace trainerd
