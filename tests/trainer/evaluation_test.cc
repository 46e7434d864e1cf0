// What an evaluation adds to the held-out loss (trainer/evaluation/): the simple baseline the
// release gate asks a model to beat, fitted on real token files, and the distribution of the
// predictions, on logits whose entropy and top-1 probability are known.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "../support/temp_dir.h"
#include "data/tokens/tokens_spec.h"
#include "trainerd/trainer/evaluation/prediction_tally.h"
#include "trainerd/trainer/evaluation/simple_baseline.h"
#include "trainerd/trainer/evaluation/window_loss_tally.h"

namespace trainerd {
namespace {

constexpr int kWindow = 8;

// `ids` as little-endian uint16 token ids in file `name`.
std::string WriteIds(const testing::TempDir& dir, const std::string& name,
                     const std::vector<int>& ids) {
  std::string data;
  for (const int id : ids) {
    data.push_back(static_cast<char>(id & 0xff));
    data.push_back(static_cast<char>(id >> 8));
  }
  return dir.Write(name, data);
}

class SimpleBaselineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<int> alternating(1000);
    for (std::size_t i = 0; i < alternating.size(); ++i) alternating[i] = static_cast<int>(i % 2);
    TokenDataKeys keys;
    keys.train = WriteIds(dir_, "train.bin", alternating);
    keys.eval = {WriteIds(dir_, "ones.bin", std::vector<int>(100, 1))};
    Result<std::unique_ptr<Dataset>> data = LoadDataset(TokenDataSpec(keys), kWindow, "");
    ASSERT_TRUE(data.ok()) << data.status().message();
    data_ = std::move(*data);
  }

  double BaselineLossOnOnes(const LossSpec& loss, std::int64_t classes) const {
    const std::optional<SimpleBaseline> baseline =
        SimpleBaseline::Fit(loss, *data_, SampleFormat::kNextToken, 7, classes);
    EXPECT_TRUE(baseline.has_value());
    const LossTerms terms =
        baseline->Loss(data_->HeldOutSamples(0, 4, SampleFormat::kNextToken).targets);
    EXPECT_EQ(terms.count, 4 * kWindow);
    return terms.sum.item<double>() / static_cast<double>(terms.count);
  }

  testing::TempDir dir_;
  std::unique_ptr<Dataset> data_;
};

TEST_F(SimpleBaselineTest, ClassFrequenciesOfTheTrainingTargetsAddKSmoothedWithTheBestK) {
  // Every window of 8 alternating ids holds four 0s and four 1s; 2^20 terms would take more
  // than kMaxFitSamples windows, so 16384 windows are read: 65536 of each id. On a slice of
  // 1s the least smoothing scores best: k at its smallest, 1e-4.
  const double n = SimpleBaseline::kMaxFitSamples * kWindow;
  const auto add_k = [&](double k, double classes) {
    return -std::log((n / 2 + k) / (n + k * classes));
  };
  EXPECT_NEAR(BaselineLossOnOnes({}, 4), add_k(1e-4, 4), 1e-9);
  EXPECT_NEAR(BaselineLossOnOnes({}, 50000), add_k(1e-4, 50000), 1e-9);
  EXPECT_LT(BaselineLossOnOnes({}, 50000), add_k(1, 50000)) << "add-one, as it was";
}

TEST_F(SimpleBaselineTest, TheKIsTheBestOnTheSlice) {
  // A slice where a quarter of the ids (2) never occur in training: no smoothing gives them
  // nothing, much gives the 1s too little. The baseline's k is the best of a fine grid, or
  // better.
  std::vector<int> mixed(400);
  for (std::size_t i = 0; i < mixed.size(); ++i) mixed[i] = i % 4 == 3 ? 2 : 1;
  TokenDataKeys keys;
  keys.train = dir_.File("train.bin");  // SetUp's alternating 0s and 1s
  keys.eval = {WriteIds(dir_, "mixed.bin", mixed)};
  Result<std::unique_ptr<Dataset>> data = LoadDataset(TokenDataSpec(keys), kWindow, "");
  ASSERT_TRUE(data.ok()) << data.status().message();
  const std::int64_t classes = 1000;
  const std::optional<SimpleBaseline> baseline =
      SimpleBaseline::Fit({}, **data, SampleFormat::kNextToken, 7, classes);
  const torch::Tensor targets = (*data)->HeldOutSamples(0, 8, SampleFormat::kNextToken).targets;
  const LossTerms terms = baseline->Loss(targets);
  const double loss = terms.sum.item<double>() / static_cast<double>(terms.count);
  const double n = SimpleBaseline::kMaxFitSamples * kWindow;
  const double unseen = targets.eq(2).sum().item<double>() / static_cast<double>(targets.numel());
  ASSERT_GT(unseen, 0.2);
  double grid_best = std::numeric_limits<double>::infinity();
  double best_k = 0;
  for (int i = 0; i <= 20000; ++i) {
    const double k = std::pow(10.0, -4 + 6.0 * i / 20000);
    const double at =
        std::log(n + k * classes) - (1 - unseen) * std::log(n / 2 + k) - unseen * std::log(k);
    if (at < grid_best) {
      grid_best = at;
      best_k = k;
    }
  }
  ASSERT_GT(best_k, 1e-3) << "the best k is inside the range searched";
  ASSERT_LT(best_k, 90.0);
  EXPECT_LE(loss, grid_best + 1e-12);
  EXPECT_GT(loss, grid_best - 1e-6);
}

TEST_F(SimpleBaselineTest, IgnoredTargetsAreNeitherCountedNorScored) {
  LossSpec loss;
  loss.ignore_index = 0;  // only the 1s train: 65536 of them
  const double n = SimpleBaseline::kMaxFitSamples * kWindow / 2;
  EXPECT_NEAR(BaselineLossOnOnes(loss, 4), -std::log((n + 1e-4) / (n + 4e-4)), 1e-9);
}

// The release gate asks a model to be below the baseline by 1% of it (the daemon's default
// regression.baseline_margin). Models that learned only the class frequencies of their
// training data, on ids drawn from a Zipf distribution over a 50k vocabulary as a language
// model's tokens are, none comes within it, though the best of them beat the add-one
// baseline the gate had.
TEST(SimpleBaselineMarginTest, AModelOfTheClassFrequenciesAloneDoesNotReachTheMargin) {
  constexpr int kVocabulary = 50000;
  std::vector<double> weights(kVocabulary);
  for (int v = 0; v < kVocabulary; ++v) weights[static_cast<std::size_t>(v)] = 1.0 / (v + 2.7);
  std::mt19937 random(3);
  std::discrete_distribution<int> zipf(weights.begin(), weights.end());
  const auto draw = [&](std::size_t count) {
    std::vector<int> ids(count);
    for (int& id : ids) id = zipf(random);
    return ids;
  };
  testing::TempDir dir;
  const std::vector<int> train = draw(200000);
  TokenDataKeys keys;
  keys.train = WriteIds(dir, "train.bin", train);
  keys.eval = {WriteIds(dir, "eval.bin", draw(20000))};
  Result<std::unique_ptr<Dataset>> data = LoadDataset(TokenDataSpec(keys), kWindow, "");
  ASSERT_TRUE(data.ok()) << data.status().message();
  const torch::Tensor targets =
      (*data)->HeldOutSamples(0, 1024, SampleFormat::kNextToken).targets.reshape({-1});
  const std::optional<SimpleBaseline> baseline =
      SimpleBaseline::Fit({}, **data, SampleFormat::kNextToken, 7, kVocabulary);
  const double baseline_loss =
      baseline->Loss(targets).sum.item<double>() / static_cast<double>(targets.numel());

  // The unigram models, fitted on every training id: add-k for several k, and a softmax over
  // learned logits trained by Adam on the training ids' cross-entropy.
  const torch::Tensor counts =
      torch::bincount(torch::tensor(train, torch::kLong), {}, kVocabulary).to(torch::kDouble);
  const double n = static_cast<double>(train.size());
  const auto loss_of = [&](const torch::Tensor& log_p) {
    return -log_p.index_select(0, targets).mean().item<double>();
  };
  std::map<std::string, double> unigram;
  for (const double k : {0.01, 0.1, 0.3, 0.5, 1.0, 2.0}) {
    unigram["add-" + std::to_string(k)] = loss_of(((counts + k) / (n + k * kVocabulary)).log());
  }
  torch::Tensor logits = torch::zeros({kVocabulary}, torch::kDouble).requires_grad_();
  torch::optim::Adam adam({logits}, torch::optim::AdamOptions(0.05));
  for (int step = 0; step < 300; ++step) {
    adam.zero_grad();
    const torch::Tensor cross_entropy = -(counts * torch::log_softmax(logits, 0)).sum() / n;
    cross_entropy.backward();
    adam.step();
  }
  unigram["learned logits"] = loss_of(torch::log_softmax(logits.detach(), 0));

  double best = std::numeric_limits<double>::infinity();
  for (const auto& [name, loss] : unigram) {
    EXPECT_GT(loss, baseline_loss * (1 - 0.01)) << name << " against " << baseline_loss;
    best = std::min(best, loss);
  }
  EXPECT_LT(best, unigram.at("add-1.000000")) << "the add-one baseline was beaten";
}

TEST_F(SimpleBaselineTest, AModulesOwnLossHasNone) {
  LossSpec loss;
  loss.kind = LossKind::kModule;
  EXPECT_FALSE(SimpleBaseline::Fit(loss, *data_, SampleFormat::kNextToken, 7, 4).has_value());
}

TEST(WindowLossTallyTest, EachWindowsCrossEntropyWhateverTheChunksOfPositions) {
  // Two windows of 3 positions over 4 classes, one target ignored, observed as 4 positions
  // and then 2 (the second chunk straddles nothing, the first does).
  torch::manual_seed(1);
  const torch::Tensor logits = torch::randn({2, 3, 4});
  const torch::Tensor targets = torch::tensor({{1, 2, -100}, {3, 0, 2}});
  WindowLossTally tally({}, 2, 3);
  const torch::Tensor flat_logits = logits.reshape({6, 4});
  const torch::Tensor flat_targets = targets.reshape({6});
  tally.Add(flat_logits.narrow(0, 0, 4), flat_targets.narrow(0, 0, 4));
  EXPECT_EQ(tally.Result(), std::nullopt) << "a window not yet seen whole";
  tally.Add(flat_logits.narrow(0, 4, 2), flat_targets.narrow(0, 4, 2));
  const std::optional<WindowLosses> windows = tally.Result();
  ASSERT_TRUE(windows.has_value());
  EXPECT_EQ(windows->terms, (std::vector<std::int64_t>{2, 3}));
  for (std::int64_t w = 0; w < 2; ++w) {
    const LossTerms want = CrossEntropySum(logits[w], targets[w], -100);
    EXPECT_NEAR(windows->sums[static_cast<std::size_t>(w)], want.sum.item<double>(), 1e-5);
  }
}

TEST(WindowLossTallyTest, SquaredErrorPerElementAndNoneForADivergedOrModulesLoss) {
  LossSpec mse;
  mse.kind = LossKind::kMse;
  WindowLossTally tally(mse, 2, 2);
  tally.Add(torch::tensor({{1.0, 2.0}, {0.0, 0.0}}), torch::tensor({{0.0, 0.0}, {3.0, 1.0}}));
  EXPECT_EQ(tally.Result()->sums, (std::vector<double>{5, 10}));
  EXPECT_EQ(tally.Result()->terms, (std::vector<std::int64_t>{2, 2}));
  WindowLossTally diverged({}, 1, 1);
  diverged.Add(torch::tensor({{std::nanf(""), 0.f}}), torch::tensor({0}));
  EXPECT_EQ(diverged.Result(), std::nullopt);
  LossSpec module;
  module.kind = LossKind::kModule;
  WindowLossTally own(module, 1, 1);
  own.Add(torch::zeros({1, 2}), torch::tensor({0}));
  EXPECT_EQ(own.Result(), std::nullopt);
}

// The bin of `value` among kPredictionBins bins of [0, 1].
std::size_t Bin(double value) {
  return std::min<std::size_t>(static_cast<std::size_t>(value * kPredictionBins),
                               kPredictionBins - 1);
}

TEST(PredictionTallyTest, EntropyTopOneAndPredictedClassPerPositionWithALoss) {
  PredictionTally tally{LossSpec{}};
  // [1, 3 positions, 4 classes]: nearly uniform (entropy and top-1 in the bins of 1 and 0.25,
  // class 0), confident in
  // class 2, and one whose target is ignored.
  const torch::Tensor logits =
      torch::tensor({{{.01f, 0.f, 0.f, 0.f}, {0.f, 0.f, 20.f, 0.f}, {9.f, 0.f, 0.f, 0.f}}});
  tally.Add(logits, torch::tensor({{1, 2, -100}}));
  tally.Add(logits.narrow(1, 1, 1), torch::tensor({{3}}));  // a second microbatch
  const std::optional<PredictionDistribution> d = tally.Result();
  ASSERT_TRUE(d.has_value());
  std::vector<std::int64_t> entropy(kPredictionBins), top1(kPredictionBins);
  entropy[Bin(1.0)] = 1;
  entropy[0] = 2;
  top1[Bin(0.25)] = 1;
  top1[Bin(1.0)] = 2;
  EXPECT_EQ(d->entropy, entropy);
  EXPECT_EQ(d->top1, top1);
  EXPECT_EQ(d->classes, (std::vector<std::int64_t>{1, 0, 2, 0}));
  EXPECT_FALSE(d->mean.has_value());
}

TEST(PredictionTallyTest, AMaskedClassCountsAndADivergedPositionIsNoPrediction) {
  PredictionTally tally{LossSpec{}};
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // A class masked to -inf leaves a certain prediction certain; NaN logits predict nothing.
  tally.Add(torch::tensor({{20.f, -inf, 0.f}, {nan, nan, nan}}), torch::tensor({0, 1}));
  const std::optional<PredictionDistribution> d = tally.Result();
  ASSERT_TRUE(d.has_value());
  std::vector<std::int64_t> certain(kPredictionBins);
  certain[0] = 1;
  EXPECT_EQ(d->entropy, certain);
  certain[0] = 0;
  certain[kPredictionBins - 1] = 1;
  EXPECT_EQ(d->top1, certain);
  EXPECT_EQ(d->classes, (std::vector<std::int64_t>{1, 0, 0}));
}

TEST(PredictionTallyTest, ClassesAreCountedUpTo256OnlyAndMseGivesMeanAndSpread) {
  PredictionTally vocabulary{LossSpec{}};
  vocabulary.Add(torch::zeros({2, 257}), torch::tensor({0, 1}));
  EXPECT_TRUE(vocabulary.Result()->classes.empty());
  EXPECT_EQ(vocabulary.Result()->entropy[kPredictionBins - 1], 2);

  LossSpec mse;
  mse.kind = LossKind::kMse;
  PredictionTally rows(mse);
  rows.Add(torch::tensor({{1.0, 2.0}, {3.0, 4.0}}), torch::zeros({2, 2}));
  const std::optional<PredictionDistribution> d = rows.Result();
  ASSERT_TRUE(d.has_value());
  EXPECT_DOUBLE_EQ(*d->mean, 2.5);
  EXPECT_DOUBLE_EQ(*d->spread, std::sqrt(1.25));
  EXPECT_TRUE(d->entropy.empty());

  LossSpec module;
  module.kind = LossKind::kModule;
  PredictionTally own(module);
  own.Add(torch::zeros({2, 2}), torch::zeros({2}));
  EXPECT_FALSE(own.Result().has_value());
}

}  // namespace
}  // namespace trainerd
