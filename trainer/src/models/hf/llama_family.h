// The decoder of LlamaForCausalLM, Qwen2ForCausalLM and MistralForCausalLM as `transformers`
// defines it (models/llama/modeling_llama.py is the spec): token embedding, decoder layers of
// RMSNorm, grouped-query self-attention with rotary positions (Llama 3.1's frequency scaling
// included), RMSNorm and a SwiGLU MLP, each with a residual; a final RMSNorm and the LM head,
// tied to the embedding or not. Modules carry the Hugging Face names, so that parameters,
// StateDict() and model.safetensors read "model.layers.0.self_attn.q_proj.weight". Each
// decoder layer is a block; attention dropout (config.attention_dropout) is the trainer's
// split-invariant dropout; a layer with a sliding window (Mistral's, Qwen2's windowed layers)
// attends over its last positions alone, in every kernel (visible_keys.h); packed documents
// (document_positions.h) each rotate from position 0 and attend within themselves.
#pragma once

#include <torch/torch.h>

#include "models/hf/hf_model.h"
#include "trainerd/trainer/models/adaptable_linear.h"
#include "trainerd/trainer/semantics/sample_dropout.h"

namespace trainerd {

// x / sqrt(mean(x^2) + eps) in float32, then times the weight in x's dtype.
class RmsNormImpl : public torch::nn::Module {
 public:
  RmsNormImpl(std::int64_t width, double eps);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  double eps_;
  torch::Tensor weight_;
};
TORCH_MODULE(RmsNorm);

// cos and sin [B or 1, 1, T, head_dim] (float32) of `positions` [B or 1, T]: rotate_half's
// pairs (i, i + D/2).
struct Rotary {
  torch::Tensor cos, sin;
};
Rotary RotaryFor(const HfDecoderConfig& config, const torch::Tensor& positions);

class HfAttentionImpl : public torch::nn::Module {
 public:
  HfAttentionImpl(const HfDecoderConfig& config, int site);
  // `first`: each query's first visible key (visible_keys.h: the layer's window's, a packed
  // document's; undefined: all before it).
  torch::Tensor forward(const torch::Tensor& x, const Rotary& rotary, const torch::Tensor& first);

 private:
  std::int64_t heads_, kv_heads_, head_dim_;
  AdaptableLinear q_proj_{nullptr}, k_proj_{nullptr}, v_proj_{nullptr}, o_proj_{nullptr};
  SampleDropout dropout_{nullptr};
};
TORCH_MODULE(HfAttention);

class HfMlpImpl : public torch::nn::Module {
 public:
  explicit HfMlpImpl(const HfDecoderConfig& config);
  torch::Tensor forward(const torch::Tensor& x);  // down(silu(gate(x)) * up(x))

 private:
  AdaptableLinear gate_proj_{nullptr}, up_proj_{nullptr}, down_proj_{nullptr};
};
TORCH_MODULE(HfMlp);

class HfDecoderLayerImpl : public torch::nn::Module {
 public:
  HfDecoderLayerImpl(const HfDecoderConfig& config, int site);
  torch::Tensor forward(const torch::Tensor& x, const Rotary& rotary, const torch::Tensor& first);

 private:
  HfAttention self_attn_{nullptr};
  HfMlp mlp_{nullptr};
  RmsNorm input_layernorm_{nullptr}, post_attention_layernorm_{nullptr};
};
TORCH_MODULE(HfDecoderLayer);

// The "model." part: embedding, layers, final norm.
class HfBackboneImpl : public torch::nn::Module {
 public:
  explicit HfBackboneImpl(const HfDecoderConfig& config);
  torch::nn::Embedding embed_tokens{nullptr};
  std::vector<HfDecoderLayer> layers;
  RmsNorm norm{nullptr};
};
TORCH_MODULE(HfBackbone);

class LlamaFamilyLm : public HfModel {
 public:
  // Parameters as LibTorch's modules initialise them: HfWeights::LoadInto fills them.
  LlamaFamilyLm(const HfDecoderConfig& config, int block_size, std::string folder);

  torch::Tensor Hidden(const torch::Tensor& tokens) override;  // [B, T] -> [B, T, hidden]
  int num_blocks() const override { return static_cast<int>(model_->layers.size()); }
  // HfModel::Flops.
  std::optional<FlopsPerSample> TrainingFlops() const override;

 private:
  HfBackbone model_{nullptr};
  torch::nn::Linear lm_head() const override { return lm_head_; }
  torch::Tensor input_embedding() const override { return model_->embed_tokens->weight; }
  torch::nn::Linear lm_head_{nullptr};  // none when tied
};

}  // namespace trainerd
