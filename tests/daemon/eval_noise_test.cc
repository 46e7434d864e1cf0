#include "trainerd/daemon/eval_noise.h"

#include <gtest/gtest.h>

#include <cmath>

namespace trainerd::daemon {
namespace {

TEST(EvalNoiseTest, WithEqualTermsTheWindowsLossesStandardDeviationOverTheirCountsRoot) {
  // Four windows of 2 terms each, losses 1, 2, 3, 4: sample sd sqrt(5/3), over sqrt(4).
  const WindowLosses windows{{2, 4, 6, 8}, {2, 2, 2, 2}};
  ASSERT_TRUE(StandardError(windows).has_value());
  EXPECT_NEAR(*StandardError(windows), std::sqrt(5.0 / 3) / 2, 1e-12);
}

TEST(EvalNoiseTest, UnevenTermsWeighTheWindowsByTheirTerms) {
  // loss = 12 / 8 = 1.5; residuals s - 1.5 t: 1 - 1.5, 11 - 10.5 (windows of 1 and 7 terms).
  // 2/1 * (0.25 + 0.25) / 8^2, a window of none left out.
  const WindowLosses windows{{1, 11, 0}, {1, 7, 0}};
  EXPECT_NEAR(*StandardError(windows), std::sqrt(2 * 0.5) / 8, 1e-12);
  EXPECT_EQ(StandardError(WindowLosses{{1, 0}, {1, 0}}), std::nullopt) << "one window with terms";
  EXPECT_EQ(StandardError(WindowLosses{}), std::nullopt);
}

TEST(EvalNoiseTest, OnTheSameWindowsWhatTheyShareCancels) {
  // b is a worse by 0.1 on every window: paired, the difference has no noise at all; as
  // independent samples, both windows' spreads add up.
  const WindowLosses a{{1, 2, 3, 4}, {1, 1, 1, 1}};
  const WindowLosses b{{1.1, 2.1, 3.1, 4.1}, {1, 1, 1, 1}};
  const std::optional<DifferenceNoise> paired = DifferenceStandardError(a, b, 1, true);
  ASSERT_TRUE(paired.has_value());
  EXPECT_TRUE(paired->paired);
  EXPECT_NEAR(paired->standard_error, 0, 1e-12);
  const std::optional<DifferenceNoise> apart = DifferenceStandardError(a, b, 1, false);
  ASSERT_TRUE(apart.has_value());
  EXPECT_FALSE(apart->paired);
  EXPECT_NEAR(apart->standard_error, std::hypot(*StandardError(a), *StandardError(b)), 1e-12);
  // Windows whose terms differ are not the same windows, whatever the caller believed.
  EXPECT_FALSE(
      DifferenceStandardError(a, WindowLosses{{1, 2, 3, 4}, {1, 1, 2, 1}}, 1, true)->paired);
  // The reference scaled by 1 + tolerance, as the gate compares it.
  EXPECT_NEAR(DifferenceStandardError(a, b, 2, false)->standard_error,
              std::hypot(*StandardError(a), 2 * *StandardError(b)), 1e-12);
}

TEST(EvalNoiseTest, StoredWindowsParseOrAreNone) {
  EXPECT_EQ(ParseWindowLosses(R"({"sums":[1.5,2],"terms":[3,4]})")->terms,
            (std::vector<std::int64_t>{3, 4}));
  EXPECT_EQ(ParseWindowLosses(""), std::nullopt);
  EXPECT_EQ(ParseWindowLosses("{"), std::nullopt);
  EXPECT_EQ(ParseWindowLosses(R"({"sums":[1.5,2],"terms":[3]})"), std::nullopt);
  EXPECT_EQ(ParseWindowLosses(R"({"sums":["x"],"terms":[3]})"), std::nullopt);
}

TEST(EvalNoiseTest, NormalQuantile) {
  EXPECT_NEAR(NormalQuantile(0.95), 1.644854, 1e-6);
  EXPECT_NEAR(NormalQuantile(0.99), 2.326348, 1e-6);
  EXPECT_NEAR(NormalQuantile(0.5), 0, 1e-12);
}

}  // namespace
}  // namespace trainerd::daemon
