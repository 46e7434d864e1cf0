#include "trainerd/trainer/plan/plan_selection.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace trainerd {
namespace {

constexpr int kBatch = 32;

PlanSpec Plan(int microbatch, int checkpointed = 0, Precision precision = Precision::kBf16) {
  PlanSpec plan;
  plan.microbatch = microbatch;
  plan.accumulation_steps = (kBatch + microbatch - 1) / microbatch;
  for (int b = 0; b < checkpointed; ++b) plan.checkpoint_blocks.push_back(b);
  plan.precision = precision;
  return plan;
}

TEST(PlanSelectionTest, MedianOfRoundsIgnoresOneSlowRound) {
  const TimedPlan p{Plan(16), {1.0, 5.0, 1.2}};
  EXPECT_DOUBLE_EQ(p.MedianSeconds(), 1.2);
  EXPECT_DOUBLE_EQ((TimedPlan{Plan(16), {1.0, 2.0}}.MedianSeconds()), 1.5);
}

TEST(PlanSelectionTest, NoiseIsTheMedianRelativeSpreadOfRepeatedTimings) {
  const std::vector<TimedPlan> plans = {
      {Plan(32), {1.00, 1.02, 1.01}},  // spread 0.02 / 1.01
      {Plan(16), {2.00, 2.20, 2.10}},  // 0.2 / 2.1
      {Plan(8), {3.00, 3.30, 3.60}},   // 0.6 / 3.3
      {Plan(4), {9.0}},                // timed once: no spread of its own
  };
  EXPECT_NEAR(RepeatedTimingNoise(plans), 0.2 / 2.1, 1e-12);
  EXPECT_EQ(RepeatedTimingNoise({{Plan(4), {9.0}}}), 0.0);
}

TEST(PlanSelectionTest, AClearlyFasterPlanWinsWhateverItsShape) {
  // 11 x 3 is an uneven split with more steps, yet 10% faster where the noise is 1%.
  const std::vector<TimedPlan> plans = {
      {Plan(32), {1.00, 1.01, 1.00}},
      {Plan(11), {0.90, 0.91, 0.90}},
  };
  const PlanSelection s = SelectFastestPlan(plans, kBatch);
  EXPECT_EQ(s.chosen, 1u);
  EXPECT_EQ(s.tied, std::vector<std::size_t>{1});
  EXPECT_NE(WhyNotChosen(s, plans, 0, kBatch).find("11.1% slower"), std::string::npos)
      << WhyNotChosen(s, plans, 0, kBatch);
}

TEST(PlanSelectionTest, WithinTheNoiseAnEvenSplitWinsOverAFasterUnevenOne) {
  // 17 x 2 (17 + 15) is 1% faster by median; the rounds spread by 2%.
  const std::vector<TimedPlan> plans = {
      {Plan(17), {0.99, 1.01, 0.99}},
      {Plan(16), {1.00, 1.02, 1.00}},
  };
  const PlanSelection s = SelectFastestPlan(plans, kBatch);
  EXPECT_EQ(s.chosen, 1u);
  EXPECT_EQ(s.tied, (std::vector<std::size_t>{1, 0}));
  const std::string why = WhyNotChosen(s, plans, 0, kBatch);
  EXPECT_NE(why.find("tied"), std::string::npos) << why;
  EXPECT_NE(why.find("1.0% faster"), std::string::npos) << why;
  EXPECT_NE(why.find("an even split"), std::string::npos) << why;
}

TEST(PlanSelectionTest, TiesPreferFewerStepsThenFewerCheckpointedBlocks) {
  const std::vector<TimedPlan> steps = {
      {Plan(8), {1.00, 1.04}},
      {Plan(16), {1.01, 1.05}},
      {Plan(32), {1.02, 1.06}},
  };
  EXPECT_EQ(SelectFastestPlan(steps, kBatch).chosen, 2u);
  const std::vector<TimedPlan> blocks = {
      {Plan(16, 2), {1.00, 1.04}},
      {Plan(16, 1), {1.02, 1.05}},
  };
  const PlanSelection s = SelectFastestPlan(blocks, kBatch);
  EXPECT_EQ(s.chosen, 1u);
  EXPECT_NE(WhyNotChosen(s, blocks, 0, kBatch).find("fewer checkpointed blocks"),
            std::string::npos);
}

TEST(PlanSelectionTest, TheTieBandIsCappedSoATieBreakCostsAtMostThreePercent) {
  // Rounds spread by 20%: 32 x 1 is 5% slower, beyond the 3% cap, so it is not tied.
  const std::vector<TimedPlan> plans = {
      {Plan(16), {1.00, 1.20, 1.00}},
      {Plan(32), {1.05, 1.25, 1.05}},
  };
  const PlanSelection s = SelectFastestPlan(plans, kBatch);
  EXPECT_GT(s.noise, 0.15);
  EXPECT_DOUBLE_EQ(s.tie_band, kMaxTieBand);
  EXPECT_EQ(s.chosen, 0u);
}

TEST(PlanSelectionTest, PlansTimedOnceAreNeverTied) {
  // Without repeated timings there is no measured noise: the fastest is chosen.
  const std::vector<TimedPlan> plans = {{Plan(16), {1.00}}, {Plan(11), {0.999}}};
  const PlanSelection s = SelectFastestPlan(plans, kBatch);
  EXPECT_EQ(s.tie_band, 0.0);
  EXPECT_EQ(s.chosen, 1u);
}

TEST(PlanSelectionTest, TheChoiceDoesNotDependOnTheOrderPlansWereTimedIn) {
  std::vector<TimedPlan> plans = {
      {Plan(16, 0, Precision::kFp32), {1.00, 1.03, 1.01}},
      {Plan(16, 0, Precision::kBf16), {1.01, 1.02, 1.00}},
      {Plan(8), {1.00, 1.01, 1.02}},
  };
  const PlanSpec first = plans[SelectFastestPlan(plans, kBatch).chosen].plan;
  std::reverse(plans.begin(), plans.end());
  const PlanSpec second = plans[SelectFastestPlan(plans, kBatch).chosen].plan;
  EXPECT_EQ(first.microbatch, 16);
  EXPECT_EQ(first.precision, Precision::kFp32);
  EXPECT_EQ(second.microbatch, first.microbatch);
  EXPECT_EQ(second.precision, first.precision);
}

}  // namespace
}  // namespace trainerd
