#include "models/gpt/gpt.h"

#include <cmath>

#include "models/gpt/blockwise_attention.h"
#include "models/gpt/visible_keys.h"
#include "trainerd/trainer/device/torch_compat.h"
#include "trainerd/trainer/models/model_registry.h"
#include "trainerd/trainer/semantics/document_positions.h"

namespace trainerd {

DropoutMasks MasksOf(GptKernels kernels) {
  return kernels == GptKernels::kFused ? DropoutMasks::kRegenerated : DropoutMasks::kStored;
}

BiasOptionalLayerNormImpl::BiasOptionalLayerNormImpl(std::int64_t width, bool bias)
    : width_(width) {
  weight_ = register_parameter("weight", torch::ones({width}));
  if (bias) bias_ = register_parameter("bias", torch::zeros({width}));
}

torch::Tensor BiasOptionalLayerNormImpl::forward(const torch::Tensor& x) {
  return torch::layer_norm(x, {width_}, weight_, bias_, /*eps=*/1e-5);
}

CausalSelfAttentionImpl::CausalSelfAttentionImpl(const GptOptions& options, int site)
    : n_head_(options.n_head), kernels_(options.kernels) {
  const std::int64_t c = options.n_embd;
  qkv_ = register_module("qkv",
                         AdaptableLinear(torch::nn::LinearOptions(c, 3 * c).bias(options.bias)));
  proj_ =
      register_module("proj", AdaptableLinear(torch::nn::LinearOptions(c, c).bias(options.bias)));
  attn_dropout_ = register_module("attn_dropout",
                                  SampleDropout(options.dropout, site, MasksOf(options.kernels)));
  resid_dropout_ = register_module(
      "resid_dropout", SampleDropout(options.dropout, site + 1, MasksOf(options.kernels)));
}

torch::Tensor ExplicitCausalAttention(const torch::Tensor& q, const torch::Tensor& k,
                                      const torch::Tensor& v, SampleDropout& dropout,
                                      const torch::Tensor& first) {
  const std::int64_t t = q.size(-2);
  torch::Tensor scores =
      torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(q.size(-1)));
  const torch::Tensor hidden =
      first.defined()
          ? VisibleKeyMask(first, q.device()).logical_not()
          : torch::ones({t, t}, torch::TensorOptions().dtype(torch::kBool).device(q.device()))
                .triu(1);
  scores = scores.masked_fill(hidden, -std::numeric_limits<float>::infinity());
  return torch::matmul(dropout->forward(torch::softmax(scores, /*dim=*/-1)), v);
}

torch::Tensor CausalSelfAttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& first) {
  const std::int64_t b = x.size(0), t = x.size(1), c = x.size(2);
  const std::int64_t head = c / n_head_;
  auto qkv = qkv_->forward(x).split(c, /*dim=*/2);
  auto heads = [&](const torch::Tensor& m) {
    return m.view({b, t, n_head_, head}).transpose(1, 2);
  };
  const torch::Tensor q = heads(qkv[0]), k = heads(qkv[1]), v = heads(qkv[2]);
  return resid_dropout_->forward(
      proj_->forward(CausalAttention(q, k, v, attn_dropout_, is_training(), kernels_, first)));
}

torch::Tensor CausalAttention(const torch::Tensor& q, const torch::Tensor& k,
                              const torch::Tensor& v, SampleDropout& dropout, bool training,
                              GptKernels kernels, const torch::Tensor& first) {
  const std::int64_t b = q.size(0), t = q.size(2), c = q.size(1) * q.size(3);
  auto merge_heads = [&](const torch::Tensor& y) {
    return y.transpose(1, 2).contiguous().view({b, t, c});
  };
  const bool draws_dropout = training && dropout->p() > 0;
  if (compat::kHasFusedAttention && !draws_dropout) {
    const torch::Tensor visible = first.defined() ? VisibleKeyMask(first, q.device()) : first;
    return merge_heads(compat::FusedCausalAttention(q, k, v, /*dropout=*/0.0, visible));
  }
  if (kernels == GptKernels::kFused && BlockwiseAttentionSupports(q)) {
    return BlockwiseCausalAttention(q, k, v, dropout->counters(), first);
  }
  return merge_heads(ExplicitCausalAttention(q, k, v, dropout, first));
}

GptBlockImpl::GptBlockImpl(const GptOptions& options, int site) {
  const std::int64_t c = options.n_embd;
  ln1_ = register_module("ln1", BiasOptionalLayerNorm(c, options.bias));
  attn_ = register_module("attn", CausalSelfAttention(options, site));
  ln2_ = register_module("ln2", BiasOptionalLayerNorm(c, options.bias));
  mlp_ = register_module(
      "mlp",
      torch::nn::Sequential(
          AdaptableLinear(torch::nn::LinearOptions(c, 4 * c).bias(options.bias)), torch::nn::GELU(),
          AdaptableLinear(torch::nn::LinearOptions(4 * c, c).bias(options.bias))));
  mlp_dropout_ = register_module(
      "mlp_dropout", SampleDropout(options.dropout, site + 2, MasksOf(options.kernels)));
}

torch::Tensor GptBlockImpl::forward(const torch::Tensor& x, const torch::Tensor& first) {
  torch::Tensor h = x + attn_->forward(ln1_->forward(x), first);
  return h + mlp_dropout_->forward(mlp_->forward(ln2_->forward(h)));
}

Gpt::Gpt(const GptOptions& options) : options_(options) {
  const std::int64_t c = options.n_embd;
  token_embedding_ =
      register_module("token_embedding", torch::nn::Embedding(options.vocab_size, c));
  position_embedding_ =
      register_module("position_embedding", torch::nn::Embedding(options.block_size, c));
  embedding_dropout_ = register_module(
      "embedding_dropout", SampleDropout(options.dropout, /*site=*/0, MasksOf(options.kernels)));
  for (int i = 0; i < options.n_layer; ++i) {
    blocks_.push_back(register_module("block" + std::to_string(i),
                                      GptBlock(options, 1 + i * GptBlockImpl::kDropoutSites)));
  }
  final_norm_ = register_module("final_norm", BiasOptionalLayerNorm(c, options.bias));
  lm_head_ = register_module(
      "lm_head", torch::nn::Linear(torch::nn::LinearOptions(c, options.vocab_size).bias(false)));
  // GPT-2 initialisation: N(0, 0.02) weights, zero biases.
  torch::NoGradGuard no_grad;
  for (auto& item : named_parameters()) {
    torch::Tensor& p = item.value();
    if (item.key().ends_with("bias")) {
      p.zero_();
    } else if (p.dim() >= 2) {
      p.normal_(0.0, 0.02);
    }
  }
}

torch::Tensor Gpt::forward(const torch::Tensor& tokens) { return OutputLogits(Hidden(tokens)); }

torch::Tensor Gpt::Hidden(const torch::Tensor& tokens) {
  const std::int64_t t = tokens.size(1);
  TORCH_CHECK(t <= options_.block_size, "sequence length ", t, " exceeds block_size ",
              options_.block_size);
  const torch::Tensor first = FirstVisibleKeys(DocumentPositionsScope::Current(), t, /*window=*/0);
  torch::Tensor x = embedding_dropout_->forward(
      token_embedding_->forward(tokens) + position_embedding_->forward(InputPositions(tokens)));
  for (int i = 0; i < num_blocks(); ++i) {
    x = RunBlock(i, blocks_[static_cast<std::size_t>(i)], x, first);
  }
  return final_norm_->forward(x);
}

torch::Tensor Gpt::OutputLogits(const torch::Tensor& hidden) { return lm_head_->forward(hidden); }

std::vector<torch::Tensor> Gpt::output_layer_parameters() const { return lm_head_->parameters(); }

std::optional<FlopsPerSample> Gpt::TrainingFlops() const {
  const GptOptions& g = options_;
  const double per_token = 6.0 * static_cast<double>(CountParameters(*this)) +
                           12.0 * g.n_layer * g.block_size * static_cast<double>(g.n_embd);
  return FlopsPerSample{per_token * g.block_size,
                        "formula: (6 x parameters + 12 x n_layer x block_size x n_embd) per token"};
}

namespace {

TRAINERD_REGISTER_MODEL("gpt", [](const ModelContext& context) {
  GptOptions options = context.options.get<GptOptions>();
  options.block_size = context.block_size;
  return std::make_shared<Gpt>(options);
});

}  // namespace
}  // namespace trainerd
