#include <gtest/gtest.h>
#include <torch/torch.h>

#include "models/gpt/gpt.h"
#include "models/gpt/visible_keys.h"
#include "models/mlp/mlp_classifier.h"
#include "trainerd/trainer/device/torch_compat.h"

namespace trainerd {
namespace {

GptOptions SmallGpt(bool bias) {
  GptOptions o;
  o.n_layer = 3;
  o.n_head = 2;
  o.n_embd = 16;
  o.block_size = 12;
  o.bias = bias;
  return o;
}

// nanoGPT's count, untied head: embeddings, per block 12C^2 + 2C LayerNorm weights + 11C
// biases (ln1 C, qkv 3C, proj C, ln2 C, fc 4C, fc-proj C), final LayerNorm, head.
std::int64_t AnalyticGptParameters(const GptOptions& o) {
  const std::int64_t c = o.n_embd, v = o.vocab_size, t = o.block_size, b = o.bias ? 1 : 0;
  return v * c + t * c + o.n_layer * (12 * c * c + 2 * c + b * 11 * c) + c + b * c + c * v;
}

TEST(GptTest, OutputShapeIsBatchByTimeByVocab) {
  torch::manual_seed(0);
  Gpt model(SmallGpt(true));
  const torch::Tensor tokens = torch::randint(0, 256, {5, 12}, torch::kLong);
  EXPECT_EQ(model.forward(tokens).sizes(), (std::vector<std::int64_t>{5, 12, 256}));
  EXPECT_EQ(model.forward(tokens.narrow(1, 0, 7)).sizes(), (std::vector<std::int64_t>{5, 7, 256}));
  EXPECT_EQ(model.num_blocks(), 3);
}

TEST(GptTest, ParameterCountMatchesTheFormulaWithAndWithoutBias) {
  for (bool bias : {true, false}) {
    Gpt model(SmallGpt(bias));
    EXPECT_EQ(CountParameters(model), AnalyticGptParameters(SmallGpt(bias))) << "bias " << bias;
  }
}

TEST(GptTest, ChangingAFutureTokenNeverChangesEarlierLogits) {
  torch::manual_seed(1);
  Gpt model(SmallGpt(true));
  model.eval();
  torch::NoGradGuard no_grad;
  const torch::Tensor tokens = torch::randint(0, 256, {2, 12}, torch::kLong);
  const torch::Tensor base = model.forward(tokens);
  for (std::int64_t t = 0; t + 1 < 12; ++t) {
    torch::Tensor changed = tokens.clone();
    changed.select(1, t + 1).add_(1).remainder_(256);
    const torch::Tensor logits = model.forward(changed);
    EXPECT_TRUE(torch::equal(logits.narrow(1, 0, t + 1), base.narrow(1, 0, t + 1))) << "t=" << t;
    // The changed position itself must see the change, or the test would pass vacuously.
    EXPECT_FALSE(torch::equal(logits.select(1, t + 1), base.select(1, t + 1))) << "t=" << t;
  }
}

// q, k, v [2, 3, 10, 8] that require gradients.
std::vector<torch::Tensor> AttentionInputs() {
  torch::manual_seed(4);
  std::vector<torch::Tensor> qkv;
  for (int i = 0; i < 3; ++i) qkv.push_back(torch::randn({2, 3, 10, 8}).requires_grad_(true));
  return qkv;
}

// The fused kernel's output and gradients against the explicit attention's, each query seeing
// the keys from its `first` (undefined: causal alone); returns the explicit output.
torch::Tensor ExpectFusedEqualsExplicit(const torch::Tensor& first) {
  SampleDropout no_dropout(0.0, /*site=*/0);
  const auto fused_in = AttentionInputs();
  const auto explicit_in = AttentionInputs();
  const torch::Tensor visible = first.defined() ? VisibleKeyMask(first, torch::kCPU) : first;
  const torch::Tensor fused = compat::FusedCausalAttention(fused_in[0], fused_in[1], fused_in[2],
                                                           /*dropout=*/0.0, visible);
  const torch::Tensor expected =
      ExplicitCausalAttention(explicit_in[0], explicit_in[1], explicit_in[2], no_dropout, first);
  EXPECT_LE((fused - expected).abs().max().item<double>(), 1e-5);
  const torch::Tensor weights = torch::randn_like(expected);
  (fused * weights).sum().backward();
  (expected * weights).sum().backward();
  for (int i = 0; i < 3; ++i) {
    EXPECT_LE((fused_in[i].grad() - explicit_in[i].grad()).abs().max().item<double>(), 1e-5)
        << "gradient of input " << i;
  }
  return expected.detach();
}

TEST(FusedAttentionTest, EqualsTheExplicitAttentionInOutputAndGradients) {
  if (!compat::kHasFusedAttention) {
    GTEST_SKIP() << "LibTorch " TORCH_VERSION
                    " has no scaled_dot_product_attention; the model "
                    "uses the explicit attention";
  }
  ExpectFusedEqualsExplicit({});
}

// A sliding window of 4 positions (visible_keys.h), as the fused kernel takes it: a mask.
TEST(FusedAttentionTest, WithASlidingWindowEqualsTheExplicitAttention) {
  if (!compat::kHasFusedAttention) GTEST_SKIP() << "no scaled_dot_product_attention";
  const torch::Tensor windowed = ExpectFusedEqualsExplicit(SlidingWindowFirstKeys(10, 4));
  const torch::Tensor causal = ExpectFusedEqualsExplicit({});
  EXPECT_GT((causal - windowed).abs().max().item<double>(), 1e-3) << "the window changed nothing";
}

TEST(FusedAttentionTest, KeysAndValuesAfterAPositionNeverReachIt) {
  if (!compat::kHasFusedAttention) GTEST_SKIP() << "no scaled_dot_product_attention";
  torch::NoGradGuard no_grad;
  const auto qkv = AttentionInputs();
  const torch::Tensor base = compat::FusedCausalAttention(qkv[0], qkv[1], qkv[2], 0.0);
  for (std::int64_t t = 0; t + 1 < 10; ++t) {
    torch::Tensor k = qkv[1].clone(), v = qkv[2].clone();
    k.narrow(2, t + 1, 1).add_(1.0);
    v.narrow(2, t + 1, 1).add_(1.0);
    const torch::Tensor changed = compat::FusedCausalAttention(qkv[0], k, v, 0.0);
    EXPECT_LE((changed.narrow(2, 0, t + 1) - base.narrow(2, 0, t + 1)).abs().max().item<double>(),
              1e-6)
        << "t=" << t;
    EXPECT_GT((changed.select(2, t + 1) - base.select(2, t + 1)).abs().max().item<double>(), 1e-3)
        << "t=" << t;
  }
}

TEST(GptTest, BlocksAreIndividuallyAddressable) {
  Gpt model(SmallGpt(true));
  torch::Tensor x = torch::randn({2, 12, 16});
  EXPECT_EQ(model.block(1)->forward(x).sizes(), x.sizes());
  EXPECT_THROW(model.block(3), std::out_of_range);
}

TEST(MlpClassifierTest, ShapesParameterCountAndBatchStatistics) {
  MlpOptions o;
  o.hidden = 10;
  o.layers = 2;
  for (bool batch_norm : {false, true}) {
    o.batch_norm = batch_norm;
    MlpClassifier model(o, /*in_features=*/256, /*classes=*/4);
    const std::int64_t bn = batch_norm ? 2 * 10 : 0;
    EXPECT_EQ(CountParameters(model), (256 * 10 + 10 + bn) + (10 * 10 + 10 + bn) + (10 * 4 + 4));
    EXPECT_EQ(model.forward(torch::rand({6, 256})).sizes(), (std::vector<std::int64_t>{6, 4}));
    EXPECT_EQ(model.has_batch_statistics(), batch_norm);
  }
}

TEST(CrossEntropySumTest, MaskedTargetsCarryNoLoss) {
  const torch::Tensor logits = torch::randn({2, 3, 5});
  const torch::Tensor targets = torch::tensor({{1, -1, 2}, {-1, -1, 4}}, torch::kLong);
  LossTerms terms = CrossEntropySum(logits, targets, /*ignore_index=*/-1);
  EXPECT_EQ(terms.count, 3);
  const torch::Tensor log_probs = torch::log_softmax(logits, -1);
  const double expected =
      -(log_probs[0][0][1] + log_probs[0][2][2] + log_probs[1][2][4]).item<double>();
  EXPECT_NEAR(terms.sum.item<double>(), expected, 1e-5);
}

}  // namespace
}  // namespace trainerd
