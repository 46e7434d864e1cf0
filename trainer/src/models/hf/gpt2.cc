#include "models/hf/gpt2.h"

#include "models/gpt/gpt.h"
#include "models/gpt/visible_keys.h"
#include "trainerd/trainer/semantics/document_positions.h"

namespace trainerd {

Conv1DImpl::Conv1DImpl(std::int64_t in, std::int64_t out) {
  weight_ = register_parameter("weight", torch::empty({in, out}).normal_(0.0, 0.02));
  bias_ = register_parameter("bias", torch::zeros({out}));
}

torch::Tensor Conv1DImpl::forward(const torch::Tensor& x) {
  std::vector<std::int64_t> shape = x.sizes().vec();
  shape.back() = weight_.size(1);
  torch::Tensor y = weight_.scalar_type() == torch::kFloat  // not a narrow frozen base's
                        ? torch::addmm(bias_, x.reshape({-1, x.size(-1)}), weight_).view(shape)
                        : LinearOfStoredWeight(x, weight_.t(), bias_);
  if (adapter_) y = y + adapter_->forward(x);
  return y;
}

Gpt2AttentionImpl::Gpt2AttentionImpl(const HfDecoderConfig& config, int site)
    : heads_(config.num_attention_heads) {
  const std::int64_t width = config.hidden_size;
  c_attn_ = register_module("c_attn", Conv1D(width, 3 * width));
  c_proj_ = register_module("c_proj", Conv1D(width, width));
  attn_dropout_ = register_module(
      "attn_dropout", SampleDropout(config.attention_dropout, site, DropoutMasks::kRegenerated));
  resid_dropout_ = register_module("resid_dropout", SampleDropout(config.residual_dropout, site + 1,
                                                                  DropoutMasks::kRegenerated));
}

torch::Tensor Gpt2AttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& first) {
  const std::int64_t b = x.size(0), t = x.size(1), c = x.size(2);
  const std::vector<torch::Tensor> qkv = c_attn_->forward(x).split(c, /*dim=*/2);
  const auto heads = [&](const torch::Tensor& m) {
    return m.view({b, t, heads_, c / heads_}).transpose(1, 2);
  };
  const torch::Tensor y = CausalAttention(heads(qkv[0]), heads(qkv[1]), heads(qkv[2]),
                                          attn_dropout_, is_training(), GptKernels::kFused, first);
  return resid_dropout_->forward(c_proj_->forward(y));
}

Gpt2MlpImpl::Gpt2MlpImpl(const HfDecoderConfig& config, int site)
    : tanh_gelu_(config.activation != "gelu") {
  c_fc_ = register_module("c_fc", Conv1D(config.hidden_size, config.intermediate_size));
  c_proj_ = register_module("c_proj", Conv1D(config.intermediate_size, config.hidden_size));
  dropout_ = register_module(
      "dropout", SampleDropout(config.residual_dropout, site, DropoutMasks::kRegenerated));
}

torch::Tensor Gpt2MlpImpl::forward(const torch::Tensor& x) {
  const torch::Tensor inner = torch::gelu(c_fc_->forward(x), tanh_gelu_ ? "tanh" : "none");
  return dropout_->forward(c_proj_->forward(inner));
}

Gpt2BlockImpl::Gpt2BlockImpl(const HfDecoderConfig& config, int site) {
  const auto norm = [&] {
    return torch::nn::LayerNorm(
        torch::nn::LayerNormOptions({config.hidden_size}).eps(config.norm_eps));
  };
  ln_1_ = register_module("ln_1", norm());
  attn_ = register_module("attn", Gpt2Attention(config, site));
  ln_2_ = register_module("ln_2", norm());
  mlp_ = register_module("mlp", Gpt2Mlp(config, site + 2));
}

torch::Tensor Gpt2BlockImpl::forward(const torch::Tensor& x, const torch::Tensor& first) {
  const torch::Tensor h = x + attn_->forward(ln_1_->forward(x), first);
  return h + mlp_->forward(ln_2_->forward(h));
}

Gpt2BackboneImpl::Gpt2BackboneImpl(const HfDecoderConfig& config) {
  wte = register_module("wte", torch::nn::Embedding(config.vocab_size, config.hidden_size));
  wpe = register_module("wpe",
                        torch::nn::Embedding(config.max_position_embeddings, config.hidden_size));
  drop = register_module(
      "drop", SampleDropout(config.embedding_dropout, /*site=*/0, DropoutMasks::kRegenerated));
  auto list = register_module("h", torch::nn::ModuleList());
  for (int i = 0; i < config.num_hidden_layers; ++i) {
    h.push_back(Gpt2Block(config, 1 + i * Gpt2BlockImpl::kDropoutSites));
    list->push_back(h.back());
  }
  ln_f = register_module(
      "ln_f",
      torch::nn::LayerNorm(torch::nn::LayerNormOptions({config.hidden_size}).eps(config.norm_eps)));
}

Gpt2Lm::Gpt2Lm(const HfDecoderConfig& config, int block_size, std::string folder)
    : HfModel(config, block_size, std::move(folder)) {
  transformer_ = register_module("transformer", Gpt2Backbone(config));
  if (!config.tie_word_embeddings) {
    lm_head_ = register_module(
        "lm_head",
        torch::nn::Linear(
            torch::nn::LinearOptions(config.hidden_size, config.vocab_size).bias(false)));
  }
}

torch::Tensor Gpt2Lm::Hidden(const torch::Tensor& tokens) {
  const torch::Tensor first =
      FirstVisibleKeys(DocumentPositionsScope::Current(), tokens.size(1), /*window=*/0);
  torch::Tensor x = transformer_->drop->forward(transformer_->wte->forward(tokens) +
                                                transformer_->wpe->forward(InputPositions(tokens)));
  for (int i = 0; i < num_blocks(); ++i) {
    x = RunBlock(i, transformer_->h[static_cast<std::size_t>(i)], x, first);
  }
  return transformer_->ln_f->forward(x);
}

std::optional<FlopsPerSample> Gpt2Lm::TrainingFlops() const {
  const HfDecoderConfig& c = config();
  return Flops(static_cast<double>(c.max_position_embeddings) * c.hidden_size,
               " and the position embedding");
}

std::vector<std::string> Gpt2Lm::IgnoredWeights() const {
  std::vector<std::string> ignored = HfModel::IgnoredWeights();
  for (int i = 0; i < num_blocks(); ++i) {
    for (const char* prefix : {"", "transformer."}) {
      for (const char* buffer : {"bias", "masked_bias"}) {
        ignored.push_back(std::string(prefix) + "h." + std::to_string(i) + ".attn." + buffer);
      }
    }
  }
  return ignored;
}

}  // namespace trainerd
