#include "trainerd/daemon/duration_forecast.h"

#include <gtest/gtest.h>

namespace trainerd::daemon {
namespace {

PlanTiming Night(double planned, double trained, double modelled = 0) {
  return {modelled, planned, trained};
}

TEST(PlanTimingTest, ErrorsAreAgainstTheTrainingsUpdate) {
  const PlanTiming t = Night(0.2, 0.25, 0.3);
  EXPECT_DOUBLE_EQ(t.PlanError(), -0.2);
  EXPECT_DOUBLE_EQ(t.TimeModelError(), 0.2);
  EXPECT_DOUBLE_EQ(t.Ratio(), 1.25);
  EXPECT_DOUBLE_EQ(Night(0.2, 0.25).TimeModelError(), 0);  // no time model figure
  EXPECT_EQ(t.Describe(),
            "an update took 0.25 s in training, the planner timed 0.2 s (-20%), its time model "
            "predicted 0.3 s (+20%)");
  EXPECT_EQ(Night(0.2, 0.25).Describe(),
            "an update took 0.25 s in training, the planner timed 0.2 s (-20%)");
}

TEST(PlanTimingTest, RoundTripsAndRefusesWhatIsNotOne) {
  const std::optional<PlanTiming> back = PlanTiming::FromJson(Night(0.2, 0.25, 0.3).ToJson());
  ASSERT_TRUE(back.has_value());
  EXPECT_DOUBLE_EQ(back->planned_update_seconds, 0.2);
  EXPECT_DOUBLE_EQ(back->trained_update_seconds, 0.25);
  EXPECT_DOUBLE_EQ(back->modelled_update_seconds, 0.3);
  EXPECT_FALSE(PlanTiming::FromJson("not json"));
  EXPECT_FALSE(PlanTiming::FromJson("{}"));
  EXPECT_FALSE(PlanTiming::FromJson(R"({"planned_update_seconds": 0.2})"));
  EXPECT_FALSE(
      PlanTiming::FromJson(R"({"planned_update_seconds": 0, "trained_update_seconds": 0.2})"));
}

TEST(DurationCorrectionTest, TheMedianRatioOfTheLastFiveNightsWithTheirRange) {
  EXPECT_EQ(CorrectionFrom({}).nights, 0);
  EXPECT_DOUBLE_EQ(CorrectionFrom({}).factor, 1);
  EXPECT_EQ(CorrectionFrom({}).Describe(), "");

  // Ratios 1.5, 1.1, 1.2, 0.9, 1.3 (newest first), then an old night of 4 left out.
  const DurationCorrection c = CorrectionFrom(
      {Night(1, 1.5), Night(1, 1.1), Night(2, 2.4), Night(1, 0.9), Night(1, 1.3), Night(1, 4)});
  EXPECT_EQ(c.nights, 5);
  EXPECT_DOUBLE_EQ(c.factor, 1.2);
  EXPECT_DOUBLE_EQ(c.low, 0.9);
  EXPECT_DOUBLE_EQ(c.high, 1.5);
  EXPECT_EQ(c.Describe(), "x1.20 by the last 5 nights on this hardware (x0.90 to x1.50)");

  const DurationCorrection back = DurationCorrection::FromJson(c.ToJson());
  EXPECT_EQ(back.Describe(), c.Describe());
  EXPECT_EQ(DurationCorrection::FromJson("{}").nights, 0);
  EXPECT_EQ(DurationCorrection::FromJson("[]").nights, 0);

  const DurationCorrection two = CorrectionFrom({Night(1, 1.2), Night(1, 1.4)});
  EXPECT_DOUBLE_EQ(two.factor, 1.3);
  EXPECT_EQ(CorrectionFrom({Night(1, 1.2)}).Describe(),
            "x1.20 by the last night on this hardware (x1.20 to x1.20)");
}

}  // namespace
}  // namespace trainerd::daemon
