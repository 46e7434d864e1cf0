#include "models/hf/llama_family.h"

#include <cmath>
#include <map>
#include <numbers>

#include "models/gpt/gpt.h"
#include "models/gpt/visible_keys.h"
#include "trainerd/trainer/semantics/document_positions.h"

namespace trainerd {
namespace {

AdaptableLinear Linear(std::int64_t in, std::int64_t out, bool bias) {
  return AdaptableLinear(torch::nn::LinearOptions(in, out).bias(bias));
}

// theta^(-2i/d) for i < d/2, in float32 as transformers computes it; rescaled per Llama 3.1
// (modeling_rope_utils._compute_llama3_parameters) for rope type llama3.
torch::Tensor InverseFrequencies(const HfDecoderConfig& config) {
  const std::int64_t d = config.head_dim;
  const torch::Tensor exponents = torch::arange(0, d, 2, torch::kLong).to(torch::kFloat) / d;
  torch::Tensor inv = 1.0 / torch::pow(torch::tensor(config.rope.theta, torch::kFloat), exponents);
  const HfRope& r = config.rope;
  if (r.type != "llama3") return inv;
  const double old_context = r.original_max_position_embeddings;
  const double low_wavelength = old_context / r.low_freq_factor;
  const double high_wavelength = old_context / r.high_freq_factor;
  const torch::Tensor wavelength = 2 * std::numbers::pi / inv;
  torch::Tensor scaled = torch::where(wavelength > low_wavelength, inv / r.factor, inv);
  const torch::Tensor smooth =
      (old_context / wavelength - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
  const torch::Tensor smoothed = (1 - smooth) * scaled / r.factor + smooth * scaled;
  const torch::Tensor medium =
      wavelength.ge(high_wavelength).logical_and(wavelength.le(low_wavelength));
  return torch::where(medium, smoothed, scaled);
}

// x [.., D] with its halves (a, b) as (-b, a).
torch::Tensor RotateHalf(const torch::Tensor& x) {
  const std::int64_t half = x.size(-1) / 2;
  return torch::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
}

torch::Tensor Rotate(const torch::Tensor& x, const Rotary& rotary) {
  return x * rotary.cos.to(x.scalar_type()) + RotateHalf(x) * rotary.sin.to(x.scalar_type());
}

}  // namespace

RmsNormImpl::RmsNormImpl(std::int64_t width, double eps) : eps_(eps) {
  weight_ = register_parameter("weight", torch::ones({width}));
}

torch::Tensor RmsNormImpl::forward(const torch::Tensor& x) {
  const torch::Tensor x32 = x.to(torch::kFloat);
  const torch::Tensor normed = x32 * torch::rsqrt(x32.pow(2).mean(-1, /*keepdim=*/true) + eps_);
  return weight_ * normed.to(x.scalar_type());
}

Rotary RotaryFor(const HfDecoderConfig& config, const torch::Tensor& positions) {
  const torch::Tensor inv = InverseFrequencies(config).to(positions.device());
  const torch::Tensor freqs = positions.to(torch::kFloat).unsqueeze(-1) * inv;
  const torch::Tensor angles = torch::cat({freqs, freqs}, -1).unsqueeze(1);
  return {angles.cos(), angles.sin()};
}

HfAttentionImpl::HfAttentionImpl(const HfDecoderConfig& config, int site)
    : heads_(config.num_attention_heads),
      kv_heads_(config.num_key_value_heads),
      head_dim_(config.head_dim) {
  const std::int64_t width = config.hidden_size;
  q_proj_ = register_module("q_proj", Linear(width, heads_ * head_dim_, config.qkv_bias));
  k_proj_ = register_module("k_proj", Linear(width, kv_heads_ * head_dim_, config.qkv_bias));
  v_proj_ = register_module("v_proj", Linear(width, kv_heads_ * head_dim_, config.qkv_bias));
  o_proj_ = register_module("o_proj", Linear(heads_ * head_dim_, width, config.o_bias));
  dropout_ = register_module("attention_dropout", SampleDropout(config.attention_dropout, site,
                                                                DropoutMasks::kRegenerated));
}

torch::Tensor HfAttentionImpl::forward(const torch::Tensor& x, const Rotary& rotary,
                                       const torch::Tensor& first) {
  const std::int64_t b = x.size(0), t = x.size(1);
  const auto heads = [&](const torch::Tensor& m, std::int64_t n) {
    return m.view({b, t, n, head_dim_}).transpose(1, 2);
  };
  // Grouped-query attention: each key/value head serves heads_ / kv_heads_ query heads.
  const auto shared = [&](const torch::Tensor& m) {
    const std::int64_t group = heads_ / kv_heads_;
    if (group == 1) return m;
    return m.unsqueeze(2)
        .expand({b, kv_heads_, group, t, head_dim_})
        .reshape({b, heads_, t, head_dim_});
  };
  const torch::Tensor q = Rotate(heads(q_proj_->forward(x), heads_), rotary);
  const torch::Tensor k = shared(Rotate(heads(k_proj_->forward(x), kv_heads_), rotary));
  const torch::Tensor v = shared(heads(v_proj_->forward(x), kv_heads_));
  return o_proj_->forward(
      CausalAttention(q, k, v, dropout_, is_training(), GptKernels::kFused, first));
}

HfMlpImpl::HfMlpImpl(const HfDecoderConfig& config) {
  const std::int64_t width = config.hidden_size, inner = config.intermediate_size;
  gate_proj_ = register_module("gate_proj", Linear(width, inner, config.mlp_bias));
  up_proj_ = register_module("up_proj", Linear(width, inner, config.mlp_bias));
  down_proj_ = register_module("down_proj", Linear(inner, width, config.mlp_bias));
}

torch::Tensor HfMlpImpl::forward(const torch::Tensor& x) {
  return down_proj_->forward(torch::silu(gate_proj_->forward(x)) * up_proj_->forward(x));
}

HfDecoderLayerImpl::HfDecoderLayerImpl(const HfDecoderConfig& config, int site) {
  self_attn_ = register_module("self_attn", HfAttention(config, site));
  mlp_ = register_module("mlp", HfMlp(config));
  input_layernorm_ =
      register_module("input_layernorm", RmsNorm(config.hidden_size, config.norm_eps));
  post_attention_layernorm_ =
      register_module("post_attention_layernorm", RmsNorm(config.hidden_size, config.norm_eps));
}

torch::Tensor HfDecoderLayerImpl::forward(const torch::Tensor& x, const Rotary& rotary,
                                          const torch::Tensor& first) {
  const torch::Tensor h = x + self_attn_->forward(input_layernorm_->forward(x), rotary, first);
  return h + mlp_->forward(post_attention_layernorm_->forward(h));
}

HfBackboneImpl::HfBackboneImpl(const HfDecoderConfig& config) {
  // pad_token_id's row takes no gradient, as transformers' padding_idx has it.
  auto embedding = torch::nn::EmbeddingOptions(config.vocab_size, config.hidden_size);
  if (config.pad_token_id >= 0) embedding.padding_idx(config.pad_token_id);
  embed_tokens = register_module("embed_tokens", torch::nn::Embedding(embedding));
  auto list = register_module("layers", torch::nn::ModuleList());
  for (int i = 0; i < config.num_hidden_layers; ++i) {
    layers.push_back(HfDecoderLayer(config, /*site=*/i));
    list->push_back(layers.back());
  }
  norm = register_module("norm", RmsNorm(config.hidden_size, config.norm_eps));
}

LlamaFamilyLm::LlamaFamilyLm(const HfDecoderConfig& config, int block_size, std::string folder)
    : HfModel(config, block_size, std::move(folder)) {
  model_ = register_module("model", HfBackbone(config));
  if (!config.tie_word_embeddings) {
    lm_head_ = register_module(
        "lm_head",
        torch::nn::Linear(
            torch::nn::LinearOptions(config.hidden_size, config.vocab_size).bias(false)));
  }
}

torch::Tensor LlamaFamilyLm::Hidden(const torch::Tensor& tokens) {
  const Rotary rotary = RotaryFor(config(), InputPositions(tokens));
  // Each layer's first visible keys (its window's, the documents'), once per window size.
  std::map<int, torch::Tensor> first_keys;
  const std::vector<int>& windows = config().layer_windows;
  torch::Tensor x = model_->embed_tokens->forward(tokens);
  for (int i = 0; i < num_blocks(); ++i) {
    const int window = windows.empty() ? 0 : windows.at(static_cast<std::size_t>(i));
    auto [first, computed] = first_keys.try_emplace(window);
    if (computed) {
      first->second = FirstVisibleKeys(DocumentPositionsScope::Current(), tokens.size(1), window);
    }
    HfDecoderLayer& layer = model_->layers[static_cast<std::size_t>(i)];
    x = RunBlock(
        i,
        [layer, rotary, keys = first->second](const torch::Tensor& in) mutable {
          return layer->forward(in, rotary, keys);
        },
        layer->parameters(), layer->buffers(), x);
  }
  return model_->norm->forward(x);
}

std::optional<FlopsPerSample> LlamaFamilyLm::TrainingFlops() const { return Flops(0, ""); }

}  // namespace trainerd
