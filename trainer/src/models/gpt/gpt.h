// GPT-style decoder: token and position embeddings, `n_layer` pre-LayerNorm blocks of causal
// multi-head self-attention and MLP, final LayerNorm, LM head (not tied to the embedding).
#pragma once

#include <torch/torch.h>

#include <vector>

#include "models/gpt/gpt_spec.h"
#include "trainerd/trainer/models/adaptable_linear.h"
#include "trainerd/trainer/models/model.h"
#include "trainerd/trainer/semantics/sample_dropout.h"

namespace trainerd {

// LayerNorm whose bias can be switched off (LibTorch 1.13's LayerNorm cannot).
class BiasOptionalLayerNormImpl : public torch::nn::Module {
 public:
  BiasOptionalLayerNormImpl(std::int64_t width, bool bias);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  std::int64_t width_;
  torch::Tensor weight_;
  torch::Tensor bias_;  // undefined when disabled
};
TORCH_MODULE(BiasOptionalLayerNorm);

// softmax(q k^T / sqrt(d) + causal mask) v for q, k, v [B, H, T, D], with `dropout` on the
// attention weights, written out: it keeps [B, H, T, T] scores, weights and the dropout mask
// for backward. The model uses it on LibTorch 1.13; 2.x has the fused
// at::scaled_dot_product_attention (compat::FusedCausalAttention), tested equal to it.
// `first`: each query's first visible key (visible_keys.h); undefined: every key before it.
torch::Tensor ExplicitCausalAttention(const torch::Tensor& q, const torch::Tensor& k,
                                      const torch::Tensor& v, SampleDropout& dropout,
                                      const torch::Tensor& first = {});

// Causal attention of q, k, v [B, H, T, D] to [B, T, H * D], each query seeing the keys from
// its `first` (visible_keys.h; undefined: all before it), `dropout` on its weights when
// `training`, by the first that applies:
// - LibTorch's fused attention where it has it (2.x) and no attention dropout is drawn (its
//   kernel draws masks from the default generator, which would make them depend on the
//   microbatch split);
// - BlockwiseCausalAttention under `kernels` kFused (model.kernels: fused, the default) for
//   CPU tensors;
// - ExplicitCausalAttention.
torch::Tensor CausalAttention(const torch::Tensor& q, const torch::Tensor& k,
                              const torch::Tensor& v, SampleDropout& dropout, bool training,
                              GptKernels kernels, const torch::Tensor& first = {});

// The dropout masks `kernels` draws: regenerated from counters (kFused) or stored.
DropoutMasks MasksOf(GptKernels kernels);

// Multi-head causal self-attention (CausalAttention). Dropout sites `site` and `site + 1`.
class CausalSelfAttentionImpl : public torch::nn::Module {
 public:
  CausalSelfAttentionImpl(const GptOptions& options, int site);
  // `first`: each query's first visible key (visible_keys.h; undefined: all before it).
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& first = {});

 private:
  int n_head_;
  GptKernels kernels_;
  AdaptableLinear qkv_{nullptr};
  AdaptableLinear proj_{nullptr};
  SampleDropout attn_dropout_{nullptr};
  SampleDropout resid_dropout_{nullptr};
};
TORCH_MODULE(CausalSelfAttention);

// Dropout sites `site` to `site + kDropoutSites - 1`.
class GptBlockImpl : public torch::nn::Module {
 public:
  static constexpr int kDropoutSites = 3;
  GptBlockImpl(const GptOptions& options, int site);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& first = {});

 private:
  BiasOptionalLayerNorm ln1_{nullptr};
  CausalSelfAttention attn_{nullptr};
  BiasOptionalLayerNorm ln2_{nullptr};
  torch::nn::Sequential mlp_{nullptr};
  SampleDropout mlp_dropout_{nullptr};
};
TORCH_MODULE(GptBlock);

class Gpt : public TrainableModel {
 public:
  explicit Gpt(const GptOptions& options);

  torch::Tensor forward(const torch::Tensor& tokens) override;  // [B, T] -> [B, T, vocab]
  // After the final norm, [B, T, n_embd]; lm_head is the output layer.
  torch::Tensor Hidden(const torch::Tensor& tokens) override;
  torch::Tensor OutputLogits(const torch::Tensor& hidden) override;
  std::vector<torch::Tensor> output_layer_parameters() const override;
  SampleFormat sample_format() const override { return SampleFormat::kNextToken; }
  int num_blocks() const override { return static_cast<int>(blocks_.size()); }
  bool has_batch_statistics() const override { return false; }
  // (6 x parameters + 12 x n_layer x block_size x n_embd) per token: nanoGPT's estimate.
  std::optional<FlopsPerSample> TrainingFlops() const override;

  GptBlock& block(int index) { return blocks_.at(static_cast<std::size_t>(index)); }
  const GptOptions& options() const { return options_; }

 private:
  GptOptions options_;
  torch::nn::Embedding token_embedding_{nullptr};
  torch::nn::Embedding position_embedding_{nullptr};
  SampleDropout embedding_dropout_{nullptr};
  std::vector<GptBlock> blocks_;
  BiasOptionalLayerNorm final_norm_{nullptr};
  torch::nn::Linear lm_head_{nullptr};
};

}  // namespace trainerd
