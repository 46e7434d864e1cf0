#include <gtest/gtest.h>
#include <torch/torch.h>

#include <atomic>
#include <filesystem>

#include "../support/stop_after_update.h"
#include "../support/temp_dir.h"
#include "../support/tiny_job_test.h"
#include "trainerd/trainer/loop/gradient_accumulation.h"
#include "trainerd/trainer/loop/trainer.h"
#include "trainerd/trainer/loop/training_checkpoint.h"
#include "trainerd/trainer/models/build_model.h"
#include "trainerd/trainer/semantics/loss_scaler.h"
#include "trainerd/trainer/semantics/lr_schedule.h"

namespace trainerd {
namespace {

class PrecisionTest : public testing::TinyJobTest {
 protected:
  // A run whose checkpoint and model go to `dir`, stopping once `stop` is set.
  static TrainerOptions RunIn(const testing::TempDir& dir, std::atomic<bool>* stop = nullptr) {
    TrainerOptions options;
    options.checkpoint_path = dir.File("checkpoint.pt");
    options.model_path = dir.File("model.pt");
    options.stop_requested = stop;
    return options;
  }
  static std::vector<torch::Tensor> Clone(const std::vector<torch::Tensor>& tensors) {
    std::vector<torch::Tensor> out;
    for (const torch::Tensor& t : tensors) out.push_back(t.detach().clone());
    return out;
  }
};

// The scaler's half of an overflow; that the loop then takes no step is
// Fp16StepThroughTheLoopSkipsOnOverflow's.
TEST(LossScalerTest, OverflowIsDetectedAndHalvesTheScale) {
  torch::manual_seed(0);
  torch::nn::Linear layer(4, 2);
  DynamicLossScaler scaler;
  const double initial = scaler.scale();
  layer->zero_grad();
  scaler.Scale(layer->forward(torch::randn({3, 4})).sum()).backward();
  layer->weight.mutable_grad()[0][0] = std::numeric_limits<float>::infinity();  // injected

  const bool overflow = scaler.UnscaleAndCheckOverflow(layer->parameters());
  EXPECT_TRUE(overflow);
  scaler.Update(overflow);
  EXPECT_EQ(scaler.scale(), initial / 2);
  EXPECT_EQ(scaler.clean_updates(), 0);
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
  auto model = BuildModel(spec_.model, 2, "test");
  torch::optim::AdamW optimizer(model->parameters(), torch::optim::AdamWOptions(1e-3));
  DynamicLossScaler scaler;
  const PrecisionContext context{Precision::kFp16, &scaler};
  const Batch batch = corpus_->TrainingSamples(1, 0, 8, SampleFormat::kNextToken);
  const torch::Tensor before = model->parameters()[0].detach().clone();

  AccumulateGradients(*model, {batch}, context);
  model->parameters()[0].mutable_grad().view({-1})[0] = std::nan("");  // injected overflow
  const StepResult skipped = UnscaleClipStep(model->parameters(), optimizer, 1.0, context);
  EXPECT_TRUE(skipped.skipped);
  EXPECT_EQ(scaler.scale(), 32768.0);
  EXPECT_TRUE(torch::equal(model->parameters()[0], before));

  model->zero_grad();
  AccumulateGradients(*model, {batch}, context);
  const StepResult taken = UnscaleClipStep(model->parameters(), optimizer, 1.0, context);
  EXPECT_FALSE(taken.skipped);
  EXPECT_FALSE(torch::equal(model->parameters()[0], before));
}

// A skipped fp16 update still counts: the update count and the schedule move on as with
// PyTorch's GradScaler and a scheduler stepped every iteration; the parameters do not.
TEST_F(PrecisionTest, ASkippedFp16UpdateCountsAndAdvancesTheSchedule) {
  spec_.plan = {4, 2, {}, Precision::kFp16};
  NullEventSink sink;
  Trainer trainer(spec_, *corpus_, &sink);
  trainer.set_test_only_fault(TrainingFault::kInfGradient);  // from the second update on
  const UpdateStats first = trainer.TrainUpdate(0);
  EXPECT_FALSE(first.skipped);
  const std::vector<torch::Tensor> before = Clone(trainer.model().parameters());
  const double scale = trainer.loss_scaler()->scale();
  const UpdateStats second = trainer.TrainUpdate(1);
  EXPECT_TRUE(second.skipped);
  EXPECT_FALSE(second.nonfinite_gradient);  // fp16 skips; only fp32/bf16 stop
  EXPECT_EQ(second.lr, LearningRateAt(spec_.optimizer, spec_.schedule, 1, spec_.training.updates));
  EXPECT_NE(second.lr, first.lr);  // warm-up: the schedule really moved
  EXPECT_EQ(trainer.loss_scaler()->scale(), scale / 2);
  const std::vector<torch::Tensor> after = trainer.model().parameters();
  for (std::size_t i = 0; i < after.size(); ++i) EXPECT_TRUE(torch::equal(after[i], before[i]));
}

TEST_F(PrecisionTest, AnInfiniteGradientInFp32OrBf16TakesNoStep) {
  for (const Precision precision : {Precision::kFp32, Precision::kBf16}) {
    spec_.plan = {8, 1, {}, precision};
    NullEventSink sink;
    Trainer trainer(spec_, *corpus_, &sink);
    trainer.set_test_only_fault(TrainingFault::kInfGradient);
    ASSERT_FALSE(trainer.TrainUpdate(0).nonfinite_gradient);
    const std::vector<torch::Tensor> before = Clone(trainer.model().parameters());
    const UpdateStats stats = trainer.TrainUpdate(1);
    EXPECT_TRUE(std::isfinite(stats.loss));
    EXPECT_TRUE(stats.nonfinite_gradient) << ToString(precision);
    EXPECT_FALSE(stats.skipped);
    const std::vector<torch::Tensor> after = trainer.model().parameters();
    for (std::size_t i = 0; i < after.size(); ++i) EXPECT_TRUE(torch::equal(after[i], before[i]));
  }
}

// Resuming an fp16 run restores the scaler the checkpoint saved, not a fresh one.
TEST_F(PrecisionTest, ResumeRestoresTheLossScaler) {
  testing::TempDir dir;
  spec_.plan = {8, 1, {}, Precision::kFp16};
  spec_.training.updates = 4;
  std::atomic<bool> stop{false};
  TrainerOptions options = RunIn(dir, &stop);
  {
    testing::StopAfterUpdate sink(2, &stop);
    Trainer trainer(spec_, *corpus_, &sink);
    trainer.set_test_only_fault(TrainingFault::kInfGradient);  // update 2 overflows
    Result<TrainOutcome> interrupted = trainer.Run(options);
    ASSERT_TRUE(interrupted.ok()) << interrupted.status().message();
    ASSERT_EQ(interrupted->kind, TrainOutcome::Kind::kInterrupted);
    ASSERT_EQ(trainer.loss_scaler()->scale(), 32768.0);  // halved once from 65536
  }
  stop = false;
  options.resume = Resume::kRequired;
  NullEventSink sink;
  Trainer resumed(spec_, *corpus_, &sink);
  Result<TrainOutcome> finished = resumed.Run(options);
  ASSERT_TRUE(finished.ok()) << finished.status().message();
  EXPECT_EQ(finished->kind, TrainOutcome::Kind::kFinished);
  // Two clean updates since: a fresh scaler would say 65536.
  EXPECT_EQ(resumed.loss_scaler()->scale(), 32768.0);
}

// An fp16 run whose loss scaler keeps skipping trains nothing: it has diverged (trainer-run exit
// 6), it has not finished with the weights it started from.
TEST_F(PrecisionTest, AnFp16RunWhoseScalerSkipsTwentyFourUpdatesInARowHasDiverged) {
  testing::TempDir dir;
  spec_.plan = {8, 1, {}, Precision::kFp16};
  spec_.training.updates = 40;
  const TrainerOptions options = RunIn(dir);
  NullEventSink sink;
  Trainer trainer(spec_, *corpus_, &sink);
  trainer.set_test_only_fault(TrainingFault::kInfGradient);  // every update from the second
  Result<TrainOutcome> outcome = trainer.Run(options);
  ASSERT_TRUE(outcome.ok()) << outcome.status().message();
  EXPECT_EQ(outcome->kind, TrainOutcome::Kind::kDiverged);
  EXPECT_EQ(outcome->updates_done, 24);  // the 25th is the 24th skip in a row
  EXPECT_NE(outcome->message.find("skipped 24 updates in a row, through update 25"),
            std::string::npos)
      << outcome->message;
  EXPECT_NE(outcome->message.find("nothing was trained since update 1"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(options.model_path));
}

TEST_F(PrecisionTest, AnFp16RunThatSkipsEveryOneOfItsUpdatesHasDiverged) {
  testing::TempDir dir;
  spec_.plan = {8, 1, {}, Precision::kFp16};
  spec_.training.updates = 4;
  std::atomic<bool> stop{false};
  TrainerOptions options = RunIn(dir, &stop);
  {
    testing::StopAfterUpdate sink(1,
                                  &stop);  // update 1 steps, then the run stops with a checkpoint
    Trainer trainer(spec_, *corpus_, &sink);
    ASSERT_EQ(trainer.Run(options)->kind, TrainOutcome::Kind::kInterrupted);
  }
  stop = false;
  options.resume = Resume::kRequired;
  NullEventSink sink;
  Trainer resumed(spec_, *corpus_, &sink);
  resumed.set_test_only_fault(TrainingFault::kInfGradient);  // updates 2, 3 and 4 overflow
  Result<TrainOutcome> outcome = resumed.Run(options);
  ASSERT_TRUE(outcome.ok()) << outcome.status().message();
  EXPECT_EQ(outcome->kind, TrainOutcome::Kind::kDiverged);
  EXPECT_NE(outcome->message.find("skipped every one of this run's 3 updates"), std::string::npos)
      << outcome->message;
  EXPECT_FALSE(std::filesystem::exists(options.model_path));
}

TEST_F(PrecisionTest, LossScalerStateSurvivesACheckpoint) {
  testing::TempDir dir;
  torch::manual_seed(1);
  auto model = BuildModel(spec_.model, 2, "test");
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
