#include "trainerd/trainer/plan/planner.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include "../support/tiny_job_test.h"
#include "models/mlp/mlp_spec.h"
#include "trainerd/trainer/plan/memory_ledger.h"
#include "trainerd/trainer/plan/parity.h"
#include "trainerd/trainer/spec/plan_text.h"

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
          << ToJson(*plan).dump();
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
  EXPECT_LE(error, 0.15) << ToJson(*plan).dump();
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
  EXPECT_NE(PlanText(*plan).find("NO PLAN FITS THE WINDOW"), std::string::npos);
  const nlohmann::json json = ToJson(*plan);
  for (const char* key :
       {"microbatch", "accumulation_steps", "checkpoint_blocks", "precision",
        "predicted_peak_bytes", "measured_peak_bytes", "usable_bytes", "predicted_update_seconds",
        "predicted_duration_seconds", "window_seconds", "fits_memory", "fits_window", "rejected"}) {
    EXPECT_TRUE(json.contains(key)) << key;
  }
}

// A plan that will be checked for parity (the daemon's) must have a check that fits: at a
// budget where an fp32 plan's check fits and a bf16 plan's (one more trainer) does not, a
// planner allowed only bf16 plans chooses one unasked, and asked falls back to the named
// baseline (fp32), whose check runs.
TEST_F(PlannerTest, APlanToBeCheckedForParityIsOneWhoseCheckFits) {
  spec_.memory.reserve_fraction = 0.0;
  // With the optimizer state on the host, a bf16 plan's check fits here (its reference runs
  // on the host): this is about the device's own.
  spec_.planner.optimizer_states = {StatePlacement::kDevice};
  const auto refused = [&](Precision precision) {
    JobSpec job = spec_;
    job.plan = {1, 8, {}, precision};
    Result<std::optional<std::string>> why = WhyParityCannotFit(job, *corpus_);
    EXPECT_TRUE(why.ok()) << why.status().message();
    return why.ok() && why->has_value();
  };
  spec_.memory.budget_bytes = full_peak_ / 8;
  while (refused(Precision::kFp32) || !refused(Precision::kBf16)) {
    spec_.memory.budget_bytes += full_peak_ / 32;
    ASSERT_LT(spec_.memory.budget_bytes, full_peak_) << "no budget between the checks";
  }
  spec_.planner.precisions = {Precision::kBf16};
  Result<ChosenPlan> unasked = PlanJob(spec_, *corpus_);
  ASSERT_TRUE(unasked.ok()) << unasked.status().message();
  EXPECT_EQ(unasked->plan.precision, Precision::kBf16);

  Result<ChosenPlan> checked = PlanJob(spec_, *corpus_, {.parity_checked = true});
  ASSERT_TRUE(checked.ok()) << checked.status().message();
  EXPECT_EQ(ToJson(checked->plan), ToJson(NamedBaselinePlan(spec_)));
  EXPECT_TRUE(std::any_of(checked->rejected.begin(), checked->rejected.end(),
                          [](const RejectedPlan& r) {
                            return r.plan.precision == Precision::kBf16 &&
                                   r.reason.starts_with(
                                       "the parity check does not fit the usable memory");
                          }))
      << "the plan card says why the faster plans were not taken: " << ToJson(*checked).dump();
  JobSpec baseline = spec_;
  baseline.plan = checked->plan;
  EXPECT_TRUE(CheckParity(baseline, *corpus_, 1).ok());
}

// The plan card lists the plans the budget ruled out that the probes predicted faster than
// the chosen one. The chosen plan's measured updates run below its prediction (0.0066 s
// against 0.0080 s on the report test's tiny job): compared with them, such plans can drop
// off the page, as CI's report test once found.
TEST(FasterAlternativesTest, ComparesPredictionWithPredictionAndKeepsTheTimedLosers) {
  ChosenPlan chosen;
  chosen.predicted_update_seconds = 1.0;
  chosen.measured_update_seconds = 0.5;
  chosen.predicted_duration_seconds = 0.5 * 10;  // measured x updates
  chosen.modelled_duration_seconds = 1.0 * 10;   // the time model's update x updates
  const std::vector<RejectedPlan> rejected = {
      {{}, 0, 7.0, "predicted peak 3 MiB exceeds usable 2 MiB"},
      {{}, 0, 12.0, "predicted peak 2.5 MiB exceeds usable 2 MiB"},  // slower
      {{}, 0, 15.0, "1.2x the chosen plan's median", /*validated=*/true},
  };
  const std::vector<RejectedPlan> listed = FasterAlternatives(rejected, chosen);
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0].predicted_duration_seconds, 7.0);
  EXPECT_TRUE(listed[1].validated);
}

// The last resort has no time model figure: every plan the job allowed was refused, and the
// card lists them (the bf16 plans of a CPU, predicted slower than the fp32 baseline, included).
TEST(FasterAlternativesTest, ListsEveryRefusedPlanBesideTheLastResort) {
  ChosenPlan chosen;
  chosen.measured_update_seconds = 0.01;
  chosen.predicted_duration_seconds = 0.01 * 10;
  const std::vector<RejectedPlan> rejected = {
      {{}, 0, 7.0, "the parity check does not fit the usable memory"},
      {{}, 0, 0.05, "predicted peak 2.5 MiB exceeds usable 2 MiB"},
  };
  const std::vector<RejectedPlan> listed = FasterAlternatives(rejected, chosen);
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0].predicted_duration_seconds, 0.05);
  EXPECT_EQ(listed[1].predicted_duration_seconds, 7.0);
}

TEST(FasterAlternativesTest, ListsTheTenPredictedFastest) {
  ChosenPlan chosen;
  chosen.modelled_duration_seconds = 10.0;
  std::vector<RejectedPlan> rejected;
  for (int i = 12; i >= 1; --i) rejected.push_back({{}, 0, 0.5 * i, "exceeds usable"});
  const std::vector<RejectedPlan> listed = FasterAlternatives(rejected, chosen);
  ASSERT_EQ(listed.size(), 10u);
  EXPECT_EQ(listed.front().predicted_duration_seconds, 0.5);
  EXPECT_EQ(listed.back().predicted_duration_seconds, 5.0);
}

// With a night's budget for the search, the finalists are timed in five interleaved rounds
// and the choice is within the measured noise of the fastest median.
TEST_F(PlannerTest, TimesFinalistsInRoundsAndChoosesWithinTheNoiseOfTheFastest) {
  BudgetAt(2.0);
  spec_.window_seconds = 6 * 3600;
  Result<ChosenPlan> plan = PlanJob(spec_, *corpus_);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_FALSE(plan->selection.timed.empty());
  double fastest = plan->selection.timed.front().MedianSeconds();
  bool chosen_was_timed = false;
  for (const TimedPlan& t : plan->selection.timed) {
    EXPECT_EQ(t.update_seconds.size(), plan->selection.timed.size() > 1 ? 5u : 1u);
    fastest = std::min(fastest, t.MedianSeconds());
    if (t.plan.microbatch == plan->plan.microbatch &&
        t.plan.checkpoint_blocks == plan->plan.checkpoint_blocks) {
      chosen_was_timed = true;
      EXPECT_DOUBLE_EQ(t.MedianSeconds(), plan->measured_update_seconds);
    }
  }
  EXPECT_TRUE(chosen_was_timed) << ToJson(*plan).dump();
  EXPECT_LE(plan->measured_update_seconds, fastest * (1 + plan->selection.tie_band));
  EXPECT_LE(plan->selection.tie_band, kMaxTieBand);
  EXPECT_DOUBLE_EQ(plan->predicted_duration_seconds,
                   plan->measured_update_seconds * spec_.training.updates);
  // The time model's own figure for the chosen plan, which never-timed candidates compare
  // with, and its error against the measured update.
  EXPECT_DOUBLE_EQ(plan->modelled_duration_seconds,
                   plan->predicted_update_seconds * spec_.training.updates);
  EXPECT_DOUBLE_EQ(plan->TimeModelError(),
                   plan->predicted_update_seconds / plan->measured_update_seconds - 1);
  EXPECT_DOUBLE_EQ(ToJson(*plan)["time_model_error"].get<double>(), plan->TimeModelError());
  // Every finalist that lost says why, with its timings behind it: the median of its rounds.
  int finalists_rejected = 0;
  for (const RejectedPlan& r : plan->rejected) {
    if (r.reason.find("interleaved round") != std::string::npos ||
        r.reason.find("tied with the chosen plan") != std::string::npos) {
      EXPECT_TRUE(r.validated);
      const auto timed = std::find_if(plan->selection.timed.begin(), plan->selection.timed.end(),
                                      [&](const TimedPlan& t) { return t.plan == r.plan; });
      ASSERT_NE(timed, plan->selection.timed.end());
      ASSERT_TRUE(r.measured_update_seconds.has_value());
      EXPECT_DOUBLE_EQ(*r.measured_update_seconds, timed->MedianSeconds());
      ++finalists_rejected;
    }
  }
  EXPECT_EQ(finalists_rejected, static_cast<int>(plan->selection.timed.size()) - 1)
      << ToJson(*plan).dump();
  EXPECT_EQ(ToJson(*plan)["selection"]["timed"].size(), plan->selection.timed.size());
}

// A search budget (2% of the window) too small for rounds still screens three plans once.
TEST_F(PlannerTest, ATinyWindowLeavesNoTimeForRounds) {
  BudgetAt(2.0);
  spec_.window_seconds = 1e-3;
  Result<ChosenPlan> plan = PlanJob(spec_, *corpus_);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  int screened = static_cast<int>(plan->selection.timed.size());
  for (const TimedPlan& t : plan->selection.timed) EXPECT_EQ(t.update_seconds.size(), 1u);
  for (const RejectedPlan& r : plan->rejected) {
    if (r.reason.find("screened") != std::string::npos) ++screened;
  }
  EXPECT_EQ(screened, 3) << ToJson(*plan).dump();
}

// A BatchNorm model trains another job when its batch is split: the planner keeps the whole
// batch (with checkpointing if memory needs it) unless the job allows accumulation.
TEST_F(PlannerTest, DoesNotChooseAccumulationForBatchNormUnlessTheJobAllowsIt) {
  spec_.model = MlpModelSpec({64, 2, /*batch_norm=*/true, 0.0}, spec_.model.block_size);
  spec_.planner.probe_microbatches = {2, 4};
  spec_.memory.budget_bytes = 1LL << 30;  // everything fits: speed alone would pick freely
  Result<ChosenPlan> plan = PlanJob(spec_, *corpus_);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->plan.accumulation_steps, 1) << ToJson(*plan).dump();
  EXPECT_EQ(NamedBaselinePlan(spec_).accumulation_steps, 1);

  spec_.training.allow_batch_norm_accumulation = true;
  EXPECT_EQ(NamedBaselinePlan(spec_).microbatch, 1);
}

// Where an update is one sample and even every block checkpointed is over usable by less than
// the gradients, the planner finds the step inside the backward, which measures under usable.
TEST_F(PlannerTest, FindsTheStepInsideTheBackwardWhereOnlyItFreesEnough) {
  spec_.training.effective_batch = 1;
  spec_.planner.probe_microbatches = {1};
  spec_.planner.optimizer_states = {StatePlacement::kDevice};
  JobSpec baseline = spec_;
  baseline.plan = NamedBaselinePlan(spec_);
  ASSERT_EQ(baseline.plan.accumulation_steps, 1);
  const Result<MemoryLedger> ledger = MeasureLedger(baseline, *corpus_);
  ASSERT_TRUE(ledger.ok()) << ledger.status().message();
  spec_.memory.reserve_fraction = 0;
  spec_.memory.budget_bytes = ledger->peak_bytes - ledger->gradients_bytes / 2;
  Result<ChosenPlan> plan = PlanJob(spec_, *corpus_);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_TRUE(plan->plan.step_in_backward) << ToJson(*plan).dump();
  EXPECT_LE(plan->measured_peak_bytes, spec_.memory.usable_bytes());
}

// With the CPU simulating an accelerator, at a budget between the peak of the named baseline
// (every block checkpointed) and that of one sample whose blocks keep their activations in
// host memory, only the activations on the host fit: the planner finds them, and the plan
// measures under usable.
TEST_F(PlannerTest, FindsTheActivationsOnTheHostWhereOnlyTheyFit) {
  spec_.memory.simulated_device = true;
  spec_.planner.optimizer_states = {StatePlacement::kDevice};
  JobSpec checkpointed = spec_, offloaded = spec_;
  checkpointed.plan = NamedBaselinePlan(spec_);
  offloaded.plan = {1, 8, {}, Precision::kFp32};
  offloaded.plan.offload_activations = true;
  const Result<MemoryLedger> all = MeasureLedger(checkpointed, *corpus_);
  const Result<MemoryLedger> host = MeasureLedger(offloaded, *corpus_);
  ASSERT_TRUE(all.ok() && host.ok());
  ASSERT_LT(host->peak_bytes, all->peak_bytes);
  spec_.memory.reserve_fraction = 0;
  spec_.memory.budget_bytes = (host->peak_bytes + all->peak_bytes) / 2;
  Result<ChosenPlan> plan = PlanJob(spec_, *corpus_);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_TRUE(plan->plan.offload_activations) << ToJson(*plan).dump();
  EXPECT_LE(plan->measured_peak_bytes, spec_.memory.usable_bytes());
  EXPECT_NE(PlanText(*plan).find("activations of the blocks not checkpointed on the host"),
            std::string::npos)
      << PlanText(*plan);
}

TEST(FitLineTest, RecoversALine) {
  const LinearFit fit = FitLine({1, 2, 4}, {5, 7, 11});
  EXPECT_NEAR(fit.intercept, 3, 1e-12);
  EXPECT_NEAR(fit.slope, 2, 1e-12);
  EXPECT_NEAR(fit.At(8), 19, 1e-12);
}

TEST(SegmentFitTest, InterpolatesGoesOnUpwardAlongTheLastSegmentAndProportionallyBelow) {
  // Unordered, with a size measured twice (its first timing counts).
  const SegmentFit fit({4, 1, 2, 2}, {10, 3, 4, 100});
  EXPECT_DOUBLE_EQ(fit.At(1), 3);
  EXPECT_DOUBLE_EQ(fit.At(1.5), 3.5);
  EXPECT_DOUBLE_EQ(fit.At(3), 7);
  EXPECT_DOUBLE_EQ(fit.At(8), 22);           // the last segment's 3 per unit goes on
  EXPECT_DOUBLE_EQ(fit.At(0.5), 1.5);        // proportional below the first point
  const SegmentFit falling({1, 2}, {5, 4});  // noise: a larger size timed faster
  EXPECT_DOUBLE_EQ(falling.At(1.5), 4.5);
  EXPECT_DOUBLE_EQ(falling.At(6), 4);  // never downwards beyond the last point
  EXPECT_DOUBLE_EQ(SegmentFit({4}, {8}).At(6), 12);
}

// An update steps once whatever its accumulation, and its last microbatch may be short: with
// forwards and backwards of 1 s per sample and a 10 s step, 8 samples cost 18 s in any split.
TEST(UpdateTimeModelTest, CountsEveryMicrobatchAndOneStep) {
  UpdateTimeModel model{SegmentFit({1, 2, 4}, {1, 2, 4}), SegmentFit({1, 2, 4}, {2, 4, 8}), 10, 0};
  EXPECT_DOUBLE_EQ(model.UpdateSeconds(8, 8, 0), 18);
  EXPECT_DOUBLE_EQ(model.UpdateSeconds(8, 1, 0), 18);
  EXPECT_DOUBLE_EQ(model.UpdateSeconds(8, 3, 0), 18);  // 3 + 3 + 2
  EXPECT_DOUBLE_EQ(model.UpdateSeconds(8, 2, 1), 26);  // every block recomputed: 2 s per sample
  EXPECT_DOUBLE_EQ(model.UpdateSeconds(8, 2, 0.5), 22);
  model.recompute_seconds_per_sample = 1.5;  // the ledger's forward is dearer than measured
  EXPECT_DOUBLE_EQ(model.MicrobatchSeconds(2, 1), 5);
}

}  // namespace
}  // namespace trainerd
