// The input-quality check's comparison (daemon/data_quality.h): each figure against its
// threshold, tonight's data alone when there is no release's data to compare with.
#include "trainerd/daemon/data_quality.h"

#include <gtest/gtest.h>

namespace trainerd::daemon {
namespace {

// Data of `samples` token ids spread evenly over `ids` ids, for a model of `vocabulary`.
DataProfileReport Tokens(std::int64_t samples, std::int64_t ids, std::int64_t vocabulary = 100) {
  DataProfileReport report;
  report.data_fingerprint = "fp-" + std::to_string(samples) + "-" + std::to_string(ids);
  report.profile.train_samples = samples;
  report.profile.id_counts.assign(static_cast<std::size_t>(ids), samples / ids);
  report.vocabulary = vocabulary;
  for (std::int64_t id = vocabulary; id < ids; ++id) report.ids_beyond_vocabulary += samples / ids;
  return report;
}

// Rows whose `columns` each have this mean and spread, `not_finite` of them with a NaN.
DataProfileReport Rows(std::int64_t rows, double mean, double spread, std::int64_t not_finite = 0) {
  DataProfileReport report;
  report.data_fingerprint = "rows";
  report.profile.train_samples = rows;
  report.profile.rows_not_finite = not_finite;
  report.profile.columns = {{0.0, 1.0}, {mean, spread}};
  return report;
}

TEST(DataQualityTest, TheSameDataAgainstItsReleasePassesWithEveryFigure) {
  const DataQualityFigures f = CompareDataProfiles(Tokens(1000, 50), Tokens(1000, 50), 7, {});
  EXPECT_TRUE(f.pass()) << f.Summary();
  EXPECT_EQ(f.size_ratio, 1.0);
  EXPECT_EQ(f.id_divergence, 0.0);
  EXPECT_EQ(f.reference_run_id, 7);
  EXPECT_EQ(f.beyond_vocabulary, 0.0);
  EXPECT_EQ(f.ToJson()["breaches"].size(), 0u);
}

// Loss masks: the share of the training targets they learn (of train_samples - 1 targets) is
// reported; against a release's masked data it may move by data_quality.max_learned_share_shift
// (10 points) at most: a chat template changed upstream moves it. Without masks on both
// sides there is no move.
TEST(DataQualityTest, TheShareTheLossMasksLearnIsReportedAndAMoveFromTheReleasesBreaches) {
  const auto masked = [](std::int64_t learned) {
    DataProfileReport report = Tokens(1001, 50);
    report.profile.learned_targets = learned;
    return report;
  };
  const DataQualityFigures near = CompareDataProfiles(masked(250), masked(300), 7, {});
  EXPECT_TRUE(near.pass()) << near.Summary();
  EXPECT_EQ(near.learned_share, 0.25);
  EXPECT_EQ(near.ToJson()["learned_share"], 0.25);
  EXPECT_DOUBLE_EQ(*near.learned_share_shift, 0.05);
  EXPECT_NE(near.Summary().find(", 25% of the targets learned"), std::string::npos)
      << near.Summary();

  const DataQualityFigures moved = CompareDataProfiles(masked(250), masked(600), 7, {});
  ASSERT_EQ(moved.breaches.size(), 1u);
  EXPECT_EQ(moved.breaches[0],
            "the loss masks learn 25% of the training targets, the current release's data's 60% "
            "(data_quality.max_learned_share_shift 10%)");

  const DataQualityFigures unmasked_release =
      CompareDataProfiles(masked(250), Tokens(1000, 50), 7, {});
  EXPECT_TRUE(unmasked_release.pass());
  EXPECT_FALSE(unmasked_release.learned_share_shift.has_value());
  const DataQualityFigures plain = CompareDataProfiles(Tokens(1000, 50), std::nullopt, {}, {});
  EXPECT_FALSE(plain.learned_share.has_value());
  EXPECT_TRUE(plain.ToJson()["learned_share"].is_null());
}

TEST(DataQualityTest, ATruncatedExportBreachesTheSizeRatio) {
  DataQualityConfig config;
  const DataQualityFigures half = CompareDataProfiles(Tokens(500, 50), Tokens(1000, 50), 7, config);
  EXPECT_TRUE(half.pass()) << "half is the default's limit: " << half.Summary();
  const DataQualityFigures f = CompareDataProfiles(Tokens(400, 50), Tokens(1000, 50), 7, config);
  ASSERT_EQ(f.breaches.size(), 1u);
  EXPECT_EQ(f.breaches[0],
            "the training data holds 400 samples, 0.4 of the current release's 1000 "
            "(data_quality.min_size_ratio 50%)");
  EXPECT_FALSE(f.ToJson()["pass"].get<bool>());
}

TEST(DataQualityTest, AnotherTokenizerBreachesTheIdDivergence) {
  DataProfileReport shifted = Tokens(1000, 50);
  // Half of the ids' mass moved onto ids the release's data never had.
  shifted.profile.id_counts.resize(100, 0);
  for (std::size_t id = 0; id < 25; ++id) {
    shifted.profile.id_counts[id + 50] = shifted.profile.id_counts[id];
    shifted.profile.id_counts[id] = 0;
  }
  const DataQualityFigures f = CompareDataProfiles(shifted, Tokens(1000, 50), 7, {});
  ASSERT_TRUE(f.id_divergence.has_value());
  EXPECT_NEAR(*f.id_divergence, 0.5, 1e-9) << "half the mass on disjoint ids";
  ASSERT_EQ(f.breaches.size(), 1u) << f.Summary();
  EXPECT_NE(f.breaches[0].find("(data_quality.max_id_divergence 0.1)"), std::string::npos);
  DataQualityConfig lenient;
  lenient.max_id_divergence = 0.6;
  EXPECT_TRUE(CompareDataProfiles(shifted, Tokens(1000, 50), 7, lenient).pass());
}

TEST(DataQualityTest, IdsBeyondTheVocabularyAndNanRowsBreachWithoutARelease) {
  const DataQualityFigures beyond =
      CompareDataProfiles(Tokens(1000, 50, 40), std::nullopt, std::nullopt, {});
  EXPECT_DOUBLE_EQ(beyond.beyond_vocabulary, 0.2);
  ASSERT_EQ(beyond.breaches.size(), 1u);
  EXPECT_EQ(beyond.breaches[0],
            "20% of the training ids are at or beyond the model's vocabulary of 40 "
            "(data_quality.max_beyond_vocabulary 0%)");
  EXPECT_FALSE(beyond.size_ratio.has_value()) << "nothing to compare with";
  EXPECT_NE(CompareDataProfiles(Tokens(1000, 50), std::nullopt, std::nullopt, {})
                .Summary()
                .find("no release to compare with"),
            std::string::npos);

  const DataQualityFigures nan =
      CompareDataProfiles(Rows(200, 0, 1, 3), std::nullopt, std::nullopt, {});
  EXPECT_DOUBLE_EQ(nan.not_finite_rows, 0.015);
  ASSERT_EQ(nan.breaches.size(), 1u);
  EXPECT_NE(nan.breaches[0].find("1.5% of the training rows hold NaN or Inf"), std::string::npos);
  DataQualityConfig tolerant;
  tolerant.max_not_finite_rows = 0.02;
  EXPECT_TRUE(CompareDataProfiles(Rows(200, 0, 1, 3), std::nullopt, std::nullopt, tolerant).pass());
}

TEST(DataQualityTest, AColumnWhoseMeanMovedBeyondItsSpreadsBreaches) {
  // Column 1: mean 10, spread 2 in the release's data; tonight 19 (4.5 spreads), then 17.
  const DataQualityFigures moved = CompareDataProfiles(Rows(200, 19, 2), Rows(200, 10, 2), 3, {});
  EXPECT_DOUBLE_EQ(*moved.column_shift, 4.5);
  EXPECT_EQ(moved.shifted_column, 1);
  ASSERT_EQ(moved.breaches.size(), 1u);
  EXPECT_EQ(moved.breaches[0],
            "input column 1's mean moved 4.5 of the current release's spread "
            "(data_quality.max_column_shift 4)");
  EXPECT_TRUE(CompareDataProfiles(Rows(200, 17, 2), Rows(200, 10, 2), 3, {}).pass());
}

}  // namespace
}  // namespace trainerd::daemon
