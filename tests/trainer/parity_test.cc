// The parity check (parity.h): correct plans pass in every precision, with and without
// dropout; every classic accumulation, clipping, scheduling and checkpointing bug (the
// test-only faults of training_fault.h) is rejected; a reduced reference keeps the plan's
// structure.
#include "trainerd/trainer/plan/parity.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "../support/cuda_test.h"
#include "../support/tiny_job_test.h"

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

TEST_F(ParityTest, Fp32PlanWithCheckpointingAccumulationAndDropoutPasses) {
  spec_.model.options["dropout"] = 0.1;
  spec_.plan = {2, 4, {0, 1}, Precision::kFp32};
  const ParityReport report = Check(3);
  EXPECT_TRUE(report.pass) << Json(report);
  ASSERT_EQ(report.updates.size(), 3u);
  // fp32 gradients agree to rounding. The step can differ more: AdamW's first step is about
  // lr * sign(g) per element, so an element within rounding of zero steps differently on each
  // side (seen on an AMD EPYC: 7.2e-4 at update 1, from position_embedding).
  for (const ParityUpdate& u : report.updates) {
    EXPECT_LE(u.gradient_diff, 1e-5);
    EXPECT_LE(u.step_diff, 1e-3);
    EXPECT_GT(u.grad_norm.reference, 0.0);
  }
  EXPECT_TRUE(report.reduction.empty());
  const nlohmann::json json = ToJson(report);
  for (const char* key : {"pass", "failures", "tolerances", "checked_plan", "updates"}) {
    EXPECT_TRUE(json.contains(key)) << key;
  }
}

TEST_F(ParityTest, Bf16AndFp16PlansPassWithinTheirTolerances) {
  spec_.model.options["dropout"] = 0.1;
  for (const Precision precision : {Precision::kBf16, Precision::kFp16}) {
    spec_.plan = {4, 2, {0}, precision};
    const ParityReport report = Check(4);
    EXPECT_TRUE(report.pass) << ToString(precision) << ": " << Json(report);
    // The plan really ran in its precision: bf16 is not bit-identical to fp32.
    if (precision == Precision::kBf16) {
      EXPECT_GT(report.updates[0].gradient_diff, 1e-5);
    }
  }
}

// Each fault is a bug the check exists for. Clipping at 0.05 makes every microbatch's
// gradient exceed the limit, dropout gives the recompute masks to get wrong, warm-up makes
// the learning rate move between updates.
TEST_F(ParityTest, RejectsEveryClassicBug) {
  spec_.model.options["dropout"] = 0.1;
  spec_.training.grad_clip = 0.05;
  spec_.plan = {2, 4, {0, 1}, Precision::kFp32};
  ASSERT_TRUE(Check(3).pass) << "the correct plan must pass for the faults to mean anything";
  for (const TrainingFault fault :
       {TrainingFault::kLossPerMicrobatch, TrainingFault::kStepPerMicrobatch,
        TrainingFault::kClipPerMicrobatch, TrainingFault::kLrPerMicrobatch,
        TrainingFault::kRecomputeFreshRng, TrainingFault::kInfGradient}) {
    const ParityReport report = Check(3, fault);
    EXPECT_FALSE(report.pass) << ToString(fault) << " passed: " << Json(report);
    EXPECT_FALSE(report.failures.empty()) << ToString(fault);
  }
}

TEST_F(ParityTest, ANonFiniteGradientFailsEvenWhenTheLossIsFinite) {
  spec_.plan = {4, 2, {}, Precision::kFp32};
  const ParityReport report = Check(2, TrainingFault::kInfGradient);
  EXPECT_FALSE(report.pass);
  ASSERT_EQ(report.updates.size(), 2u);
  EXPECT_TRUE(std::isfinite(report.updates[1].loss.plan));
  EXPECT_NE(Json(report).find("not finite"), std::string::npos) << Json(report);
}

TEST_F(ParityTest, AReducedReferenceKeepsThePlansStructure) {
  spec_.plan = {4, 2, {1}, Precision::kFp32};
  spec_.memory.reserve_fraction = 0.0;
  spec_.memory.budget_bytes = 1536 << 10;  // the full-batch reference needs more
  const ParityReport report = Check(2);
  ASSERT_FALSE(report.reduction.empty()) << Json(report);
  EXPECT_LT(report.checked_effective_batch, 8);
  EXPECT_GE(report.checked_plan.accumulation_steps, 2) << "the reduction dropped accumulation";
  EXPECT_EQ(report.checked_plan.checkpoint_blocks, std::vector<int>{1});
  EXPECT_EQ(report.reduction["effective_batch"],
            nlohmann::json::array({8, report.checked_effective_batch}));
  EXPECT_TRUE(report.pass) << Json(report);
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

}  // namespace
}  // namespace trainerd
