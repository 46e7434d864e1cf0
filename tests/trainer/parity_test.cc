// The parity check (parity.h): correct plans pass in every precision, with and without
// dropout; every classic accumulation, clipping, scheduling, weight-decay, checkpointing and
// optimizer bug (the test-only faults of training_fault.h) is rejected in every precision, by
// at least three times its tolerance; an fp16 plan's overflow skips are replayed; the whole
// check is fitted to the usable memory, keeping the plan's structure, or refused as an OOM.
#include "trainerd/trainer/plan/parity.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include "../support/cuda_test.h"
#include "../support/tiny_job_test.h"
#include "trainerd/trainer/device/device_memory.h"
#include "trainerd/trainer/plan/memory_ledger.h"

namespace trainerd {
namespace {

class ParityTest : public testing::TinyJobTest {
 protected:
  ParityReport Check(int updates, TrainingFault fault = TrainingFault::kNone) {
    Result<ParityReport> report = CheckParity(spec_, *corpus_, updates, fault);
    EXPECT_TRUE(report.ok()) << report.status().message();
    return report.ok() ? *report : ParityReport{};
  }
  std::string Json(const ParityReport& report) { return ToJson(report).dump(); }
};

// How far beyond its tolerance the report's clearest failure is: the largest measured
// difference over its tolerance, or infinity when a check failed without a measured
// difference (a gradient not finite, a tensor stepped on one side only).
double Margin(const ParityReport& report) {
  double margin = 0;
  for (const ParityComparison& c : report.comparisons) margin = std::max(margin, c.worst_ratio);
  for (const std::string& failure : report.failures) {
    if (failure.find(" differs by ") == std::string::npos) {
      return std::numeric_limits<double>::infinity();
    }
  }
  return margin;
}

TEST_F(ParityTest, Fp32PlanWithCheckpointingAccumulationAndDropoutPasses) {
  spec_.model.options["dropout"] = 0.1;
  spec_.plan = {2, 4, {0, 1}, Precision::kFp32};
  const ParityReport report = Check(3);
  EXPECT_TRUE(report.pass) << Json(report);
  ASSERT_EQ(report.comparisons.size(), 1u) << "an fp32 plan's structure is its precision";
  const ParityComparison& c = report.comparisons[0];
  EXPECT_EQ(c.judges, "as planned");
  ASSERT_EQ(c.updates.size(), 3u);
  // fp32 gradients agree to rounding. The step can differ more: AdamW's first step is about
  // lr * sign(g) per element, so an element within rounding of zero steps differently on each
  // side (seen on an AMD EPYC: 7.2e-4 at update 1, from position_embedding).
  for (const ParityUpdate& u : c.updates) {
    EXPECT_LE(u.gradient_diff, 1e-5);
    EXPECT_LE(u.step_diff, 1e-3);
    EXPECT_GT(u.grad_norm.reference, 0.0);
  }
  EXPECT_LT(c.worst_ratio, 1.0);
  EXPECT_FALSE(c.worst_check.empty());
  EXPECT_TRUE(report.reduction.empty());
  const nlohmann::json json = ToJson(report);
  for (const char* key : {"pass", "failures", "comparisons", "checked_plan", "plan"}) {
    EXPECT_TRUE(json.contains(key)) << key;
  }
}

// A bf16 plan is judged twice: its structure in fp32 at fp32's tolerances, then as planned at
// bf16's. fp16 on the CPU computes in fp32 (only its loss scaler runs): one comparison.
TEST_F(ParityTest, Bf16AndFp16PlansPassWithinTheirTolerances) {
  spec_.model.options["dropout"] = 0.1;
  spec_.plan = {4, 2, {0}, Precision::kBf16};
  const ParityReport bf16 = Check(4);
  EXPECT_TRUE(bf16.pass) << Json(bf16);
  ASSERT_EQ(bf16.comparisons.size(), 2u) << Json(bf16);
  const ParityComparison& structure = bf16.comparisons[0];
  const ParityComparison& as_planned = bf16.comparisons[1];
  EXPECT_EQ(structure.judges, "structure");
  EXPECT_EQ(structure.precision, Precision::kFp32);
  EXPECT_EQ(structure.tolerances.gradient, ToleranceFor(Precision::kFp32, true).gradient);
  EXPECT_EQ(as_planned.judges, "as planned");
  EXPECT_EQ(as_planned.precision, Precision::kBf16);
  ASSERT_EQ(structure.updates.size(), 4u);
  ASSERT_EQ(as_planned.updates.size(), 4u);
  EXPECT_LE(structure.updates[0].gradient_diff, 1e-5);
  // The plan really ran in its precision: bf16 is not bit-identical to fp32.
  EXPECT_GT(as_planned.updates[0].gradient_diff, 1e-5);

  spec_.plan.precision = Precision::kFp16;
  const ParityReport fp16 = Check(4);
  EXPECT_TRUE(fp16.pass) << Json(fp16);
  ASSERT_EQ(fp16.comparisons.size(), 1u);
  EXPECT_EQ(fp16.comparisons[0].precision, Precision::kFp16);
  EXPECT_EQ(fp16.comparisons[0].tolerances.gradient, ToleranceFor(Precision::kFp32, true).gradient);
}

// Each fault is a bug the check exists for, in every precision, each rejected by at least
// three times its tolerance. Clipping at 0.05 makes every microbatch's gradient exceed the
// limit, dropout gives the recompute masks to get wrong, warm-up makes the learning rate
// move between updates, the job's weight decay (0.1) gives the per-microbatch decay its size.
TEST_F(ParityTest, RejectsEveryClassicBugInEveryPrecisionByThreeTimesItsTolerance) {
  spec_.model.options["dropout"] = 0.1;
  spec_.training.grad_clip = 0.05;
  for (const Precision precision : {Precision::kFp32, Precision::kBf16, Precision::kFp16}) {
    spec_.plan = {2, 4, {0, 1}, precision};
    const ParityReport correct = Check(3);
    ASSERT_TRUE(correct.pass) << ToString(precision) << ": the correct plan must pass for the "
                              << "faults to mean anything: " << Json(correct);
    for (const TrainingFault fault :
         {TrainingFault::kLossPerMicrobatch, TrainingFault::kStepPerMicrobatch,
          TrainingFault::kClipPerMicrobatch, TrainingFault::kLrPerMicrobatch,
          TrainingFault::kRecomputeFreshRng, TrainingFault::kInfGradient,
          TrainingFault::kWeightDecayPerMicrobatch, TrainingFault::kFrozenParameter}) {
      const ParityReport report = Check(3, fault);
      EXPECT_FALSE(report.pass) << ToString(precision) << " " << ToString(fault)
                                << " passed: " << Json(report);
      EXPECT_GE(Margin(report), 3.0)
          << ToString(precision) << " " << ToString(fault) << ": " << Json(report);
    }
  }
}

// A frozen small tensor hides in the step over all parameters (bf16 allows 0.5 there) but
// not in the step of each tensor: stepped in the reference only fails whatever its size.
TEST_F(ParityTest, ATensorSteppedOnOneSideOnlyFailsWhereTheWholeStepCannotSeeIt) {
  spec_.plan = {4, 2, {}, Precision::kBf16};
  const ParityReport report = Check(2, TrainingFault::kFrozenParameter);
  EXPECT_FALSE(report.pass);
  ASSERT_EQ(report.comparisons.size(), 2u);
  const ParityComparison& as_planned = report.comparisons[1];
  ASSERT_FALSE(as_planned.updates.empty());
  EXPECT_LE(as_planned.updates[0].step_diff, as_planned.tolerances.step) << Json(report);
  const bool named =
      std::any_of(report.failures.begin(), report.failures.end(), [](const std::string& f) {
        return f.starts_with("bf16 as planned, update 1: ") &&
               f.ends_with(" was stepped in the reference only");
      });
  EXPECT_TRUE(named) << Json(report);
}

TEST_F(ParityTest, ANonFiniteGradientFailsEvenWhenTheLossIsFinite) {
  spec_.plan = {4, 2, {}, Precision::kFp32};
  const ParityReport report = Check(2, TrainingFault::kInfGradient);
  EXPECT_FALSE(report.pass);
  ASSERT_EQ(report.comparisons.size(), 1u);
  ASSERT_EQ(report.comparisons[0].updates.size(), 2u);
  EXPECT_TRUE(std::isfinite(report.comparisons[0].updates[1].loss.plan));
  EXPECT_NE(Json(report).find("not finite"), std::string::npos) << Json(report);
}

// A correct fp16 plan skips the updates whose scaled gradient overflows; the fp32 reference
// has no such overflow. The reference replays the skip (computes the update, takes no step),
// so both sides keep the same optimizer state, and the check runs one update longer.
TEST_F(ParityTest, AnFp16OverflowSkipIsReplayedAndTheCheckJudgesAsManyStepsAsAsked) {
  spec_.plan = {4, 2, {1}, Precision::kFp16};
  const ParityReport report = Check(2, TrainingFault::kOverflowFirstUpdate);
  EXPECT_TRUE(report.pass) << Json(report);
  ASSERT_EQ(report.comparisons.size(), 1u);
  const std::vector<ParityUpdate>& updates = report.comparisons[0].updates;
  ASSERT_EQ(updates.size(), 3u) << "the skipped update does not count: " << Json(report);
  EXPECT_TRUE(updates[0].skipped);
  EXPECT_TRUE(std::isinf(updates[0].grad_norm.plan));
  // The overflowed gradient norm travels to the daemon as null and comes back not finite.
  std::vector<std::string> mistyped;
  const ParityReport read =
      Parse<ParityReport>(nlohmann::json::parse(ToJson(report).dump()), &mistyped);
  EXPECT_TRUE(mistyped.empty()) << ::testing::PrintToString(mistyped);
  ASSERT_EQ(read.comparisons.size(), 1u);
  EXPECT_TRUE(std::isnan(read.comparisons[0].updates[0].grad_norm.plan));
  EXPECT_EQ(read.comparisons[0].updates[0].grad_norm.reference, updates[0].grad_norm.reference);
  EXPECT_EQ(updates[0].step_diff, 0.0) << "no side moved a parameter";
  for (std::size_t i = 1; i < updates.size(); ++i) {
    EXPECT_FALSE(updates[i].skipped);
    EXPECT_GT(updates[i].grad_norm.reference, 0.0);
    EXPECT_LE(updates[i].gradient_diff, 1e-5) << "update " << i + 1;
  }
}

// A plan whose loss scaler skips every update trains nothing: the check stops where a run
// would, at 24 skips in a row.
TEST_F(ParityTest, AnFp16PlanSkippingEveryUpdateFails) {
  spec_.plan = {4, 2, {}, Precision::kFp16};
  const ParityReport report = Check(2, TrainingFault::kInfGradient);  // from update 2 on
  EXPECT_FALSE(report.pass);
  ASSERT_EQ(report.comparisons.size(), 1u);
  EXPECT_EQ(report.comparisons[0].updates.size(), 25u) << Json(report);
  ASSERT_FALSE(report.failures.empty());
  EXPECT_TRUE(
      report.failures.back().starts_with("fp16 as planned, update 25: the fp16 loss "
                                         "scaler skipped 24 updates in a row"))
      << Json(report);
}

// The whole check is budgeted: its trainers (two, three for bf16) each hold the model's
// state, and on a CPU the judge's snapshots share the memory. At a budget the reference alone
// fits at the job's shape but the whole check does not, it runs at a reduced shape, predicted
// before it runs, within the usable memory as a limit, the plan keeping its structure.
TEST_F(ParityTest, TheWholeCheckIsFittedToTheUsableMemory) {
  spec_.plan = {4, 2, {1}, Precision::kBf16};
  spec_.memory.reserve_fraction = 0.0;
  const ParityReport unlimited = Check(2);
  ASSERT_TRUE(unlimited.reduction.empty()) << Json(unlimited);
  const ParityMemory& full = unlimited.memory;
  EXPECT_EQ(full.trainers, 3);
  EXPECT_GT(full.measured_peak_bytes, 0);
  EXPECT_LE(full.measured_peak_bytes, full.predicted_peak_bytes) << Json(unlimited);
  JobSpec reference = spec_;
  reference.plan = {8, 1, {}, Precision::kFp32};
  Result<MemoryLedger> alone = MeasureLedger(reference, *corpus_);
  ASSERT_TRUE(alone.ok()) << alone.status().message();
  // Between the reference alone and the whole check, nearer the whole check: the reference
  // at the job's shape fits, the check does not, and at half the batch it does.
  spec_.memory.budget_bytes =
      full.predicted_peak_bytes - full.snapshot_bytes - full.model_state_bytes / 4;
  ASSERT_GT(spec_.memory.budget_bytes, alone->peak_bytes);

  const ParityReport report = Check(2);
  EXPECT_TRUE(report.pass) << Json(report);
  ASSERT_FALSE(report.reduction.empty()) << Json(report);
  EXPECT_EQ(report.checked_effective_batch, 4);
  EXPECT_EQ(report.checked_plan.accumulation_steps, 2) << "the reduction dropped accumulation";
  EXPECT_EQ(report.checked_plan.checkpoint_blocks, std::vector<int>{1});
  EXPECT_EQ(report.checked_plan.precision, Precision::kBf16);
  EXPECT_EQ(report.reduction["effective_batch"], nlohmann::json::array({8, 4}));
  EXPECT_TRUE(report.reduction["why"].get<std::string>().starts_with(
      "the whole check at effective batch 8 (3 trainers) is predicted at "))
      << Json(report);
  const ParityMemory& m = report.memory;
  EXPECT_EQ(m.limit_bytes, m.usable_bytes + m.snapshot_bytes) << "on a CPU";
  EXPECT_LE(m.predicted_peak_bytes, m.limit_bytes);
  EXPECT_LE(m.measured_peak_bytes, m.predicted_peak_bytes);
}

// When even the smallest shape cannot hold the check's trainers, it is refused before any of
// them is built, as an out-of-memory error (trainer-run exits 4, and the daemon falls back as
// for an OOM) that says what would not fit.
TEST_F(ParityTest, ACheckThatCannotFitIsAnOutOfMemoryErrorBeforeItRuns) {
  spec_.plan = {4, 2, {1}, Precision::kFp32};
  spec_.memory.reserve_fraction = 0.0;
  JobSpec reference = spec_;
  reference.plan = {8, 1, {}, Precision::kFp32};
  Result<MemoryLedger> alone = MeasureLedger(reference, *corpus_);
  ASSERT_TRUE(alone.ok()) << alone.status().message();
  // One trainer's state and a half: never two trainers, whatever the batch.
  spec_.memory.budget_bytes =
      3 * (alone->parameters_bytes + alone->gradients_bytes + alone->optimizer_state_bytes) / 2;
  Result<ParityReport> report = CheckParity(spec_, *corpus_, 2);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), Status::Code::kOutOfMemory) << report.status().message();
  EXPECT_TRUE(
      report.status().message().starts_with("the parity check does not fit the usable memory ("))
      << report.status().message();
  EXPECT_NE(report.status().message().find("even at effective batch 2: it is predicted at "),
            std::string::npos)
      << report.status().message();
}

// The planner's prediction of the check (WhyParityCannotFit) is the check's own: across
// budgets, it refuses a plan exactly when CheckParity refuses it before running, in the same
// words, and it depends on the plan's precision (bf16 adds a third trainer).
TEST_F(ParityTest, ThePredictionOfWhetherTheCheckFitsIsTheChecksOwn) {
  spec_.memory.reserve_fraction = 0.0;
  JobSpec reference = spec_;
  reference.plan = {8, 1, {}, Precision::kFp32};
  Result<MemoryLedger> alone = MeasureLedger(reference, *corpus_);
  ASSERT_TRUE(alone.ok()) << alone.status().message();
  const std::int64_t state =
      alone->parameters_bytes + alone->gradients_bytes + alone->optimizer_state_bytes;
  bool only_bf16_refused = false;
  for (const double states : {1.5, 2.0, 2.5, 3.0, 3.5}) {
    spec_.memory.budget_bytes = static_cast<std::int64_t>(states * static_cast<double>(state));
    std::optional<std::string> refused[2];
    for (const Precision precision : {Precision::kFp32, Precision::kBf16}) {
      spec_.plan = {4, 2, {1}, precision};
      Result<std::optional<std::string>> why = WhyParityCannotFit(spec_, *corpus_);
      ASSERT_TRUE(why.ok()) << why.status().message();
      Result<ParityReport> check = CheckParity(spec_, *corpus_, 1);
      if (*why) {
        ASSERT_FALSE(check.ok()) << states << " states, " << ToString(precision);
        EXPECT_EQ(check.status().message(), **why);
      } else {
        EXPECT_TRUE(check.ok()) << states << " states, " << ToString(precision) << ": "
                                << check.status().message();
      }
      refused[precision == Precision::kBf16] = *why;
    }
    EXPECT_FALSE(refused[0] && !refused[1]) << "fp32's check is never the larger";
    only_bf16_refused = only_bf16_refused || (!refused[0] && refused[1]);
  }
  EXPECT_TRUE(only_bf16_refused) << "no budget between fp32's check and bf16's";
}

class CudaParityTest : public testing::CudaTestOf<ParityTest> {};

// On the GPU the masks come from per-sample CUDA generators (compat::MakeGenerator): a plan
// with dropout and checkpointing still computes the large-batch job, and a fresh-RNG
// recompute is still caught.
TEST_F(CudaParityTest, DropoutPlanPassesAndAFreshRecomputeFailsOnCuda) {
  spec_.runtime.device = "cuda";
  spec_.model.options["dropout"] = 0.1;
  spec_.plan = {2, 4, {0, 1}, Precision::kFp32};
  const ParityReport correct = Check(3);
  EXPECT_TRUE(correct.pass) << Json(correct);
  EXPECT_FALSE(Check(3, TrainingFault::kRecomputeFreshRng).pass);
}

// On the GPU fp16 computes in fp16: the plan is also run in fp32 (its structure), and both
// that run and the reference replay the plan's overflow skip; the structure run's gradient of
// the skipped update is still judged.
TEST_F(CudaParityTest, AnFp16OverflowSkipIsReplayedByTheStructureRunAndTheReferenceOnCuda) {
  spec_.runtime.device = "cuda";
  spec_.model.options["dropout"] = 0.1;
  spec_.plan = {2, 4, {0}, Precision::kFp16};
  const ParityReport report = Check(2, TrainingFault::kOverflowFirstUpdate);
  EXPECT_TRUE(report.pass) << Json(report);
  ASSERT_EQ(report.comparisons.size(), 2u) << Json(report);
  const ParityComparison& structure = report.comparisons[0];
  ASSERT_EQ(structure.updates.size(), 3u) << Json(report);
  EXPECT_TRUE(structure.updates[0].skipped);
  EXPECT_GT(structure.updates[0].grad_norm.plan, 0.0) << "the replayed update is judged";
  EXPECT_LE(structure.updates[0].gradient_diff, structure.tolerances.gradient);
  EXPECT_EQ(report.comparisons[1].updates.size(), 3u);
  EXPECT_TRUE(report.comparisons[1].updates[0].skipped);
}

}  // namespace
}  // namespace trainerd
