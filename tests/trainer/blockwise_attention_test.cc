// BlockwiseCausalAttention against the explicit formula it replaces: the same output and
// gradients (with the same regenerated dropout mask) at lengths inside one block of queries and
// across several, causality, and what it keeps for backward.
#include "models/gpt/blockwise_attention.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <tuple>
#include <vector>

#include "models/gpt/gpt.h"
#include "models/gpt/visible_keys.h"
#include "trainerd/trainer/device/device_memory.h"
#include "trainerd/trainer/semantics/sample_dropout.h"

namespace trainerd {
namespace {

constexpr int kSite = 5;
static_assert(10 < kAttentionRowsPerBlock && 150 > 2 * kAttentionRowsPerBlock,
              "the lengths tested: inside one block of queries, and across three");

// q, k, v [2, 3, t, 8] that require gradients.
std::vector<torch::Tensor> Inputs(std::int64_t t, torch::Dtype dtype) {
  torch::manual_seed(11);
  std::vector<torch::Tensor> qkv;
  for (int i = 0; i < 3; ++i) {
    qkv.push_back((2 * torch::randn({2, 3, t, 8})).to(dtype).requires_grad_(true));
  }
  return qkv;
}

SampleDropout TrainingDropout(double p) {
  SampleDropout dropout(p, kSite, DropoutMasks::kRegenerated);
  dropout->train();
  return dropout;
}

// Explicit attention, heads merged as BlockwiseCausalAttention returns them.
torch::Tensor Explicit(const std::vector<torch::Tensor>& qkv, SampleDropout& dropout) {
  const torch::Tensor y = ExplicitCausalAttention(qkv[0], qkv[1], qkv[2], dropout);
  return y.transpose(1, 2).reshape({y.size(0), y.size(2), -1});
}

double MaxDifference(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kFloat) - b.to(torch::kFloat)).abs().max().item<double>();
}

// (sequence length, dropout probability): 10 is inside one block of queries, 150 spans three
// with a partial last one.
class BlockwiseAttentionTest : public ::testing::TestWithParam<std::tuple<std::int64_t, double>> {};

std::string NameOf(const ::testing::TestParamInfo<std::tuple<std::int64_t, double>>& info) {
  return "T" + std::to_string(std::get<0>(info.param)) +
         (std::get<1>(info.param) > 0 ? "_Dropout" : "_NoDropout");
}

INSTANTIATE_TEST_SUITE_P(Shapes, BlockwiseAttentionTest,
                         ::testing::Combine(::testing::Values(10, 150),
                                            ::testing::Values(0.0, 0.1)),
                         NameOf);

TEST_P(BlockwiseAttentionTest, EqualsTheExplicitAttentionInOutputAndGradients) {
  const auto [t, p] = GetParam();
  SampleDropout dropout = TrainingDropout(p);
  const SampleStreamScope stream(SampleStream{3, 40});
  const auto blockwise_in = Inputs(t, torch::kFloat);
  const auto explicit_in = Inputs(t, torch::kFloat);
  const torch::Tensor blockwise = BlockwiseCausalAttention(blockwise_in[0], blockwise_in[1],
                                                           blockwise_in[2], dropout->counters());
  const torch::Tensor expected = Explicit(explicit_in, dropout);
  ASSERT_EQ(blockwise.sizes(), expected.sizes());
  EXPECT_LE(MaxDifference(blockwise, expected), 2e-5);
  if (p > 0) {
    torch::NoGradGuard no_grad;
    const torch::Tensor undropped =
        BlockwiseCausalAttention(blockwise_in[0], blockwise_in[1], blockwise_in[2], std::nullopt);
    EXPECT_GT(MaxDifference(expected, undropped), 1e-2) << "the dropout changed nothing";
  }
  const torch::Tensor upstream = torch::randn_like(expected);
  (blockwise * upstream).sum().backward();
  (expected * upstream).sum().backward();
  for (int i = 0; i < 3; ++i) {
    EXPECT_LE(MaxDifference(blockwise_in[i].grad(), explicit_in[i].grad()), 5e-5)
        << "gradient of input "
        << "qkv"[i];
  }
}

TEST_P(BlockwiseAttentionTest, KeysAndValuesAfterAPositionNeverReachIt) {
  const auto [t, p] = GetParam();
  SampleDropout dropout = TrainingDropout(p);
  const SampleStreamScope stream(SampleStream{3, 0});
  torch::NoGradGuard no_grad;
  const auto qkv = Inputs(t, torch::kFloat);
  const torch::Tensor base = BlockwiseCausalAttention(qkv[0], qkv[1], qkv[2], dropout->counters());
  for (const std::int64_t position : {std::int64_t{0}, t / 2, t - 2}) {
    torch::Tensor k = qkv[1].clone(), v = qkv[2].clone();
    k.narrow(2, position + 1, 1).add_(1.0);
    v.narrow(2, position + 1, 1).add_(1.0);
    const torch::Tensor changed = BlockwiseCausalAttention(qkv[0], k, v, dropout->counters());
    EXPECT_TRUE(torch::equal(changed.narrow(1, 0, position + 1), base.narrow(1, 0, position + 1)))
        << "position " << position;
    EXPECT_GT(MaxDifference(changed.select(1, position + 1), base.select(1, position + 1)), 1e-3)
        << "position " << position;
  }
}

// Each query's first visible key (visible_keys.h): a sliding window of 7 positions, the same
// for both samples [1, T]; and segments that restart at different positions in each sample
// [2, T] (the first key of a query is its segment's start).
std::vector<torch::Tensor> FirstKeysOf(std::int64_t t) {
  torch::Tensor segments = torch::zeros({2, t}, torch::kLong);
  for (std::int64_t i = 0; i < t; ++i) {
    segments[0][i] = i >= t / 2 ? t / 2 : (i >= 3 ? 3 : 0);
    segments[1][i] = i >= t - 4 ? t - 4 : 0;
  }
  return {SlidingWindowFirstKeys(t, 7), segments};
}

TEST_P(BlockwiseAttentionTest, WithFirstKeysEqualsTheExplicitAttentionAndNeverSeesBefore) {
  const auto [t, p] = GetParam();
  SampleDropout dropout = TrainingDropout(p);
  for (const torch::Tensor& first : FirstKeysOf(t)) {
    const SampleStreamScope stream(SampleStream{3, 40});
    const auto blockwise_in = Inputs(t, torch::kFloat);
    const auto explicit_in = Inputs(t, torch::kFloat);
    const torch::Tensor blockwise = BlockwiseCausalAttention(
        blockwise_in[0], blockwise_in[1], blockwise_in[2], dropout->counters(), first);
    const torch::Tensor y =
        ExplicitCausalAttention(explicit_in[0], explicit_in[1], explicit_in[2], dropout, first);
    const torch::Tensor expected = y.transpose(1, 2).reshape({y.size(0), y.size(2), -1});
    EXPECT_LE(MaxDifference(blockwise, expected), 2e-5) << first.sizes();
    const torch::Tensor upstream = torch::randn_like(expected);
    (blockwise * upstream).sum().backward();
    (expected * upstream).sum().backward();
    for (int i = 0; i < 3; ++i) {
      EXPECT_LE(MaxDifference(blockwise_in[i].grad(), explicit_in[i].grad()), 5e-5)
          << first.sizes() << " gradient of input "
          << "qkv"[i];
    }
    // Key 2 changed: no query whose first key is after it moves, not by a bit; query 2 does
    // (without dropout, which could drop its weight).
    torch::NoGradGuard no_grad;
    const torch::Tensor q = blockwise_in[0].detach(), k = blockwise_in[1].detach(),
                        v = blockwise_in[2].detach();
    const torch::Tensor base = BlockwiseCausalAttention(q, k, v, std::nullopt, first);
    const torch::Tensor k2 = k.clone(), v2 = v.clone();
    k2.narrow(2, 2, 1).add_(1.0);
    v2.narrow(2, 2, 1).add_(1.0);
    const torch::Tensor changed = BlockwiseCausalAttention(q, k2, v2, std::nullopt, first);
    const torch::Tensor difference = (changed - base).abs().amax(-1);  // [B, T]
    const torch::Tensor sees = first.le(2).logical_and(torch::arange(t).ge(2));
    EXPECT_FALSE(difference.gt(0).logical_and(sees.logical_not()).any().item<bool>())
        << first.sizes() << ": a query saw a key before its first\n"
        << difference;
    EXPECT_TRUE(difference.select(1, 2).gt(1e-4).all().item<bool>()) << difference;
  }
}

// The sliding window's first keys: transformers' kv_idx > q_idx - window.
TEST(VisibleKeysTest, ASlidingWindowSeesItsLastPositionsAndCoveringAllIsNone) {
  const torch::Tensor first = SlidingWindowFirstKeys(6, 3);
  EXPECT_TRUE(torch::equal(first, torch::tensor({0, 0, 0, 1, 2, 3}, torch::kLong).unsqueeze(0)));
  EXPECT_FALSE(SlidingWindowFirstKeys(6, 6).defined());
  EXPECT_FALSE(SlidingWindowFirstKeys(6, 0).defined());
  const torch::Tensor mask = VisibleKeyMask(first, torch::kCPU);
  ASSERT_EQ(mask.sizes(), (std::vector<std::int64_t>{1, 1, 6, 6}));
  for (std::int64_t i = 0; i < 6; ++i) {
    for (std::int64_t j = 0; j < 6; ++j) {
      EXPECT_EQ(mask[0][0][i][j].item<bool>(), j <= i && j > i - 3) << i << ", " << j;
    }
  }
}

// The model's layout: q, k and v are heads of one [B, T, 3 * H * D] projection, whose rows the
// products read in place, with the output written into [B, T, H * D] directly. The same
// output and gradients as on contiguous copies.
TEST(BlockwiseAttentionLayoutTest, HeadsOfTheQkvProjectionInPlaceEqualContiguousCopies) {
  SampleDropout dropout = TrainingDropout(0.1);
  const SampleStreamScope stream(SampleStream{3, 40});
  torch::manual_seed(13);
  const std::int64_t b = 2, h = 3, t = 150, d = 8;
  const torch::Tensor projection = torch::randn({b, t, 3 * h * d}).requires_grad_(true);
  std::vector<torch::Tensor> heads;
  for (const torch::Tensor& part : projection.split(h * d, 2)) {
    heads.push_back(part.view({b, t, h, d}).transpose(1, 2));
  }
  ASSERT_FALSE(heads[0].is_contiguous());
  std::vector<torch::Tensor> copies;
  for (const torch::Tensor& x : heads)
    copies.push_back(x.detach().contiguous().requires_grad_(true));
  const torch::Tensor in_place =
      BlockwiseCausalAttention(heads[0], heads[1], heads[2], dropout->counters());
  const torch::Tensor copied =
      BlockwiseCausalAttention(copies[0], copies[1], copies[2], dropout->counters());
  EXPECT_LE(MaxDifference(in_place, copied), 1e-6);
  const torch::Tensor upstream = torch::randn_like(copied);
  (in_place * upstream).sum().backward();
  (copied * upstream).sum().backward();
  const auto grads = projection.grad().split(h * d, 2);
  for (int i = 0; i < 3; ++i) {
    EXPECT_LE(MaxDifference(grads[i].view({b, t, h, d}).transpose(1, 2), copies[i].grad()), 1e-6)
        << "gradient of input "
        << "qkv"[i];
  }
}

// What makes a plan with accumulation compute the job of the real large batch: samples 2-5 of
// a microbatch of 8 starting at sample 40 come out the same, to the bit, in output and
// gradients, as a microbatch of 4 starting at sample 42.
TEST(BlockwiseAttentionSplitTest, ASamplesResultDoesNotDependOnItsMicrobatch) {
  SampleDropout dropout = TrainingDropout(0.1);
  torch::manual_seed(12);
  std::vector<torch::Tensor> whole, part;
  for (int i = 0; i < 3; ++i) {
    whole.push_back(torch::randn({8, 2, 32, 16}).requires_grad_(true));
    part.push_back(whole.back().detach().narrow(0, 2, 4).clone().requires_grad_(true));
  }
  const torch::Tensor upstream = torch::randn({8, 32, 32});
  {
    const SampleStreamScope stream(SampleStream{3, 40});
    (BlockwiseCausalAttention(whole[0], whole[1], whole[2], dropout->counters()) * upstream)
        .sum()
        .backward();
  }
  const SampleStreamScope stream(SampleStream{3, 42});
  const torch::Tensor y = BlockwiseCausalAttention(part[0], part[1], part[2], dropout->counters());
  (y * upstream.narrow(0, 2, 4)).sum().backward();
  {
    torch::NoGradGuard no_grad;
    const SampleStreamScope again(SampleStream{3, 40});
    EXPECT_TRUE(
        torch::equal(y, BlockwiseCausalAttention(whole[0], whole[1], whole[2], dropout->counters())
                            .narrow(0, 2, 4)));
  }
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(torch::equal(part[i].grad(), whole[i].grad().narrow(0, 2, 4)))
        << "gradient of input "
        << "qkv"[i] << " differs by "
        << MaxDifference(part[i].grad(), whole[i].grad().narrow(0, 2, 4));
  }
}

TEST(BlockwiseAttentionPrecisionTest, Bfloat16IsWithinItsRoundingOfTheExplicitAttention) {
  SampleDropout dropout = TrainingDropout(0.1);
  const SampleStreamScope stream(SampleStream{3, 40});
  const auto blockwise_in = Inputs(150, torch::kBFloat16);
  const auto explicit_in = Inputs(150, torch::kFloat);
  const torch::Tensor blockwise = BlockwiseCausalAttention(blockwise_in[0], blockwise_in[1],
                                                           blockwise_in[2], dropout->counters());
  const torch::Tensor expected = Explicit(explicit_in, dropout);
  EXPECT_EQ(blockwise.scalar_type(), torch::kBFloat16);
  EXPECT_LE(MaxDifference(blockwise, expected), 0.1);
  const torch::Tensor upstream = torch::randn_like(expected);
  (blockwise * upstream.to(torch::kBFloat16)).sum().backward();
  (expected * upstream).sum().backward();
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(blockwise_in[i].grad().scalar_type(), torch::kBFloat16);
    const double scale = explicit_in[i].grad().abs().max().item<double>();
    EXPECT_LE(MaxDifference(blockwise_in[i].grad(), explicit_in[i].grad()), 0.05 * scale)
        << "gradient of input "
        << "qkv"[i];
  }
}

// What autograd keeps between forward and backward, by the ledger's counting allocator: the
// inputs (already alive here), the output (returned) and a float log-sum-exp per query row,
// nothing [B, H, T, T].
TEST(BlockwiseAttentionMemoryTest, KeepsOnlyTheRowLogSumExpBesidesInputsAndOutput) {
  SampleDropout dropout = TrainingDropout(0.1);
  const SampleStreamScope stream(SampleStream{3, 0});
  const auto qkv = Inputs(150, torch::kFloat);
  DeviceMemory& memory = MemoryOf(torch::kCPU);
  const std::int64_t before = memory.live_bytes();
  const torch::Tensor y = BlockwiseCausalAttention(qkv[0], qkv[1], qkv[2], dropout->counters());
  const std::int64_t kept_for_backward = memory.live_bytes() - before - y.nbytes();
  EXPECT_EQ(kept_for_backward, 2 * 3 * 150 * static_cast<std::int64_t>(sizeof(float)));
}

TEST(BlockwiseAttentionMemoryTest, RefusesWhatItDoesNotTake) {
  const auto qkv = Inputs(10, torch::kDouble);
  EXPECT_FALSE(BlockwiseAttentionSupports(qkv[0]));
  EXPECT_THROW(BlockwiseCausalAttention(qkv[0], qkv[1], qkv[2], std::nullopt), c10::Error);
  const auto floats = Inputs(10, torch::kFloat);
  EXPECT_THROW(
      BlockwiseCausalAttention(floats[0], floats[1].narrow(2, 0, 5), floats[2], std::nullopt),
      c10::Error);
}

}  // namespace
}  // namespace trainerd
