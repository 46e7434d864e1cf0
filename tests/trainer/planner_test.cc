#include "trainerd/trainer/planner.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "../support/tiny_job_test.h"
#include "trainerd/trainer/memory_ledger.h"

namespace trainerd {
namespace {

class PlannerTest : public testing::TinyJobTest {
 protected:
  void SetUp() override {
    spec_.planner.precisions = {Precision::kFp32};
    spec_.planner.probe_microbatches = {1, 2, 4};
    TinyJobTest::SetUp();
    Result<MemoryLedger> full =
        MeasureLedger(spec_, *corpus_);  // microbatch 8, nothing checkpointed
    ASSERT_TRUE(full.ok());
    full_peak_ = full->peak_bytes;
  }
  // A budget whose usable part (10% reserve) is `fraction` of the full-batch plan's peak.
  void BudgetAt(double fraction) {
    spec_.memory.reserve_fraction = 0.1;
    spec_.memory.budget_bytes = static_cast<std::int64_t>(full_peak_ * fraction / 0.9);
  }
  std::int64_t full_peak_ = 0;
};

TEST_F(PlannerTest, MeasuredPeakNeverExceedsUsableAcrossBudgets) {
  for (double fraction : {2.0, 0.8, 0.6, 0.45}) {
    BudgetAt(fraction);
    Result<ChosenPlan> plan = PlanJob(spec_, *corpus_);
    ASSERT_TRUE(plan.ok()) << fraction << ": " << plan.status().message();
    EXPECT_TRUE(plan->fits_memory);
    EXPECT_LE(plan->measured_peak_bytes, plan->usable_bytes) << fraction;
    EXPECT_GE(plan->plan.accumulation_steps * plan->plan.microbatch, 8);
    // The plan never changes the job.
    EXPECT_EQ((8 + plan->plan.microbatch - 1) / plan->plan.microbatch,
              plan->plan.accumulation_steps);
    if (fraction < 1.0) {
      // The full batch without checkpointing needs more than usable: it cannot be chosen.
      EXPECT_TRUE(plan->plan.microbatch < 8 || !plan->plan.checkpoint_blocks.empty())
          << plan->ToJson().dump();
    }
  }
}

TEST_F(PlannerTest, PredictedPeakIsWithin15PercentOfMeasured) {
  BudgetAt(0.6);
  Result<ChosenPlan> plan = PlanJob(spec_, *corpus_);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  const double error =
      std::fabs(static_cast<double>(plan->predicted_peak_bytes - plan->measured_peak_bytes)) /
      static_cast<double>(plan->measured_peak_bytes);
  EXPECT_LE(error, 0.15) << plan->ToJson().dump();
}

TEST_F(PlannerTest, ABudgetBelowTheNamedBaselineDoesNotFit) {
  spec_.memory.budget_bytes = 64 << 10;  // less than the parameters alone
  Result<ChosenPlan> plan = PlanJob(spec_, *corpus_);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), Status::Code::kOutOfMemory);
  EXPECT_NE(plan.status().message().find("does not fit"), std::string::npos);
  EXPECT_NE(plan.status().message().find("named baseline"), std::string::npos);
}

TEST_F(PlannerTest, ReportsWhenNoPlanFitsTheWindow) {
  BudgetAt(2.0);
  spec_.window_seconds = 1e-3;
  Result<ChosenPlan> plan = PlanJob(spec_, *corpus_);
  ASSERT_TRUE(plan.ok());
  EXPECT_FALSE(plan->fits_window);
  EXPECT_NE(plan->ToText().find("NO PLAN FITS THE WINDOW"), std::string::npos);
  const nlohmann::json json = plan->ToJson();
  for (const char* key :
       {"microbatch", "accumulation_steps", "checkpoint_blocks", "precision",
        "predicted_peak_bytes", "measured_peak_bytes", "usable_bytes", "predicted_update_seconds",
        "predicted_duration_seconds", "window_seconds", "fits_memory", "fits_window", "rejected"}) {
    EXPECT_TRUE(json.contains(key)) << key;
  }
}

// A BatchNorm model trains another job when its batch is split: the planner keeps the whole
// batch (with checkpointing if memory needs it) unless the job allows accumulation.
TEST_F(PlannerTest, DoesNotChooseAccumulationForBatchNormUnlessTheJobAllowsIt) {
  spec_.model.kind = ModelKind::kMlpClassifier;
  spec_.model.mlp = {64, 2, /*batch_norm=*/true, 0.0};
  spec_.planner.probe_microbatches = {2, 4};
  spec_.memory.budget_bytes = 1LL << 30;  // everything fits: speed alone would pick freely
  Result<ChosenPlan> plan = PlanJob(spec_, *corpus_);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->plan.accumulation_steps, 1) << plan->ToJson().dump();
  EXPECT_EQ(NamedBaselinePlan(spec_).accumulation_steps, 1);

  spec_.training.allow_batch_norm_accumulation = true;
  EXPECT_EQ(NamedBaselinePlan(spec_).microbatch, 1);
}

TEST(FitLineTest, RecoversALine) {
  const LinearFit fit = FitLine({1, 2, 4}, {5, 7, 11});
  EXPECT_NEAR(fit.intercept, 3, 1e-12);
  EXPECT_NEAR(fit.slope, 2, 1e-12);
  EXPECT_NEAR(fit.At(8), 19, 1e-12);
}

}  // namespace
}  // namespace trainerd
