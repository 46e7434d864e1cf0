#include <gtest/gtest.h>
#include <torch/torch.h>

#include "../support/temp_dir.h"
#include "../support/tiny_job_test.h"
#include "trainerd/trainer/gradient_accumulation.h"
#include "trainerd/trainer/loss_scaler.h"
#include "trainerd/trainer/parity.h"
#include "trainerd/trainer/training_checkpoint.h"

namespace trainerd {
namespace {

class PrecisionTest : public testing::TinyJobTest {
 protected:
};

TEST_F(PrecisionTest, Bf16TracksFp32WithinTheStatedTolerance) {
  spec_.plan = {4, 2, {0}, Precision::kBf16};
  Result<ParityReport> report = CheckParity(spec_, *corpus_, /*updates=*/8);
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_TRUE(report->pass) << report->ToJson(spec_.plan).dump();
  EXPECT_LE(report->max_loss_diff, ToleranceFor(Precision::kBf16).max_loss_diff);
  // bf16 really ran: the losses are not bit-identical to fp32.
  EXPECT_GT(report->max_loss_diff, 0.0);
}

TEST_F(PrecisionTest, Fp32PlanWithCheckpointingAndAccumulationPassesParity) {
  spec_.plan = {2, 4, {0, 1}, Precision::kFp32};
  Result<ParityReport> report = CheckParity(spec_, *corpus_, /*updates=*/4);
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->pass) << report->ToJson(spec_.plan).dump();
  EXPECT_LE(report->max_grad_diff, 1e-6);
  EXPECT_EQ(report->reference_shape["reduced"], false);
  const nlohmann::json json = report->ToJson(spec_.plan);
  for (const char* key :
       {"pass", "max_grad_diff", "max_loss_diff", "tolerances", "reference_shape"}) {
    EXPECT_TRUE(json.contains(key)) << key;
  }
}

TEST_F(PrecisionTest, ParityShrinksTheShapeWhenTheReferenceDoesNotFit) {
  spec_.plan = {2, 4, {0, 1}, Precision::kFp32};
  spec_.memory.reserve_fraction = 0.0;
  spec_.memory.budget_bytes = 1536 << 10;  // the full-batch reference needs more
  Result<ParityReport> report = CheckParity(spec_, *corpus_, /*updates=*/2);
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_EQ(report->reference_shape["reduced"], true);
  EXPECT_LT(report->reference_shape["effective_batch"].get<int>(), 8);
  EXPECT_TRUE(report->pass) << report->ToJson(spec_.plan).dump();
}

TEST(LossScalerTest, OverflowSkipsTheStepAndHalvesTheScale) {
  torch::manual_seed(0);
  torch::nn::Linear layer(4, 2);
  DynamicLossScaler scaler;
  const double initial = scaler.scale();
  torch::optim::SGD optimizer(layer->parameters(), torch::optim::SGDOptions(0.1));
  layer->zero_grad();
  scaler.Scale(layer->forward(torch::randn({3, 4})).sum()).backward();
  layer->weight.mutable_grad()[0][0] = std::numeric_limits<float>::infinity();  // injected
  const torch::Tensor before = layer->weight.detach().clone();

  const bool overflow = scaler.UnscaleAndCheckOverflow(layer->parameters());
  EXPECT_TRUE(overflow);
  scaler.Update(overflow);
  EXPECT_EQ(scaler.scale(), initial / 2);
  EXPECT_EQ(scaler.clean_updates(), 0);
  EXPECT_TRUE(torch::equal(layer->weight, before));
}

TEST(LossScalerTest, UnscalingRecoversTheTrueGradient) {
  torch::manual_seed(0);
  torch::nn::Linear scaled(4, 2);
  auto plain = std::dynamic_pointer_cast<torch::nn::LinearImpl>(scaled->clone());
  const torch::Tensor x = torch::randn({3, 4});
  DynamicLossScaler scaler(LossScalerOptions{1024.0, 2.0, 0.5, 3});
  scaler.Scale(scaled->forward(x).sum()).backward();
  plain->forward(x).sum().backward();
  EXPECT_FALSE(scaler.UnscaleAndCheckOverflow(scaled->parameters()));
  EXPECT_TRUE(torch::allclose(scaled->weight.grad(), plain->weight.grad(), 1e-6, 1e-7));
}

TEST(LossScalerTest, GrowsAfterTheIntervalOfCleanUpdates) {
  DynamicLossScaler scaler(LossScalerOptions{1024.0, 2.0, 0.5, 3});
  scaler.Update(false);
  scaler.Update(false);
  EXPECT_EQ(scaler.scale(), 1024.0);
  scaler.Update(false);
  EXPECT_EQ(scaler.scale(), 2048.0);
  scaler.Update(true);
  EXPECT_EQ(scaler.scale(), 1024.0);
}

TEST_F(PrecisionTest, Fp16StepThroughTheLoopSkipsOnOverflow) {
  spec_.plan = {8, 1, {}, Precision::kFp16};
  torch::manual_seed(1);
  auto model = BuildModel(spec_.model, 2);
  torch::optim::AdamW optimizer(model->parameters(), torch::optim::AdamWOptions(1e-3));
  DynamicLossScaler scaler;
  const PrecisionContext context{Precision::kFp16, &scaler};
  const Batch batch = corpus_->TrainingSamples(1, 0, 8, SampleFormat::kNextToken);
  const torch::Tensor before = model->parameters()[0].detach().clone();

  AccumulateGradients(*model, {batch}, context);
  model->parameters()[0].mutable_grad().view({-1})[0] = std::nan("");  // injected overflow
  const StepResult skipped = UnscaleClipStep(*model, optimizer, 1.0, context);
  EXPECT_TRUE(skipped.skipped);
  EXPECT_EQ(scaler.scale(), 32768.0);
  EXPECT_TRUE(torch::equal(model->parameters()[0], before));

  model->zero_grad();
  AccumulateGradients(*model, {batch}, context);
  const StepResult taken = UnscaleClipStep(*model, optimizer, 1.0, context);
  EXPECT_FALSE(taken.skipped);
  EXPECT_FALSE(torch::equal(model->parameters()[0], before));
}

TEST_F(PrecisionTest, LossScalerStateSurvivesACheckpoint) {
  testing::TempDir dir;
  torch::manual_seed(1);
  auto model = BuildModel(spec_.model, 2);
  torch::optim::AdamW optimizer(model->parameters(), torch::optim::AdamWOptions(1e-3));
  const CheckpointState saved{3, "job", 1024.0, 7};
  ASSERT_TRUE(SaveTrainingCheckpoint(dir.File("c.pt"), *model, optimizer, saved, torch::kCPU).ok());
  Result<CheckpointState> loaded =
      LoadTrainingCheckpoint(dir.File("c.pt"), *model, optimizer, "job", torch::kCPU);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  ASSERT_TRUE(loaded->loss_scale.has_value());
  EXPECT_EQ(*loaded->loss_scale, 1024.0);
  EXPECT_EQ(loaded->clean_updates, 7);
}

}  // namespace
}  // namespace trainerd
