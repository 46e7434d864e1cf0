// What an evaluation adds to the held-out loss (trainer/evaluation/): the simple baseline the
// release gate asks a model to beat, fitted on real token files, and the distribution of the
// predictions, on logits whose entropy and top-1 probability are known.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "../support/temp_dir.h"
#include "data/tokens/tokens_spec.h"
#include "trainerd/trainer/evaluation/prediction_tally.h"
#include "trainerd/trainer/evaluation/simple_baseline.h"

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

TEST_F(SimpleBaselineTest, ClassFrequenciesOfTheTrainingTargetsAddOneSmoothed) {
  // Every window of 8 alternating ids holds four 0s and four 1s; 2^20 terms would take more
  // than kMaxFitSamples windows, so 16384 windows are read: 65536 of each id.
  const double n = SimpleBaseline::kMaxFitSamples * kWindow;
  EXPECT_NEAR(BaselineLossOnOnes({}, 4), -std::log((n / 2 + 1) / (n + 4)), 1e-9);
  // Over 50000 classes the smoothing takes a larger share from the ids seen.
  EXPECT_NEAR(BaselineLossOnOnes({}, 50000), -std::log((n / 2 + 1) / (n + 50000)), 1e-9);
}

TEST_F(SimpleBaselineTest, IgnoredTargetsAreNeitherCountedNorScored) {
  LossSpec loss;
  loss.ignore_index = 0;  // only the 1s train: 65536 of them
  const double n = SimpleBaseline::kMaxFitSamples * kWindow / 2;
  EXPECT_NEAR(BaselineLossOnOnes(loss, 4), -std::log((n + 1) / (n + 4)), 1e-9);
}

TEST_F(SimpleBaselineTest, AModulesOwnLossHasNone) {
  LossSpec loss;
  loss.kind = LossKind::kModule;
  EXPECT_FALSE(SimpleBaseline::Fit(loss, *data_, SampleFormat::kNextToken, 7, 4).has_value());
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
