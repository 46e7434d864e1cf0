#include "trainerd/trainer/loop/gradient_accumulation.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "../support/grad_compare.h"
#include "../support/recording_sink.h"
#include "../support/temp_dir.h"
#include "../support/tiny_job_test.h"
#include "models/gpt/gpt.h"
#include "models/mlp/mlp_classifier.h"
#include "trainerd/trainer/loop/trainer.h"
#include "trainerd/trainer/models/build_model.h"
#include "trainerd/trainer/semantics/lr_schedule.h"

namespace trainerd {
namespace {

using testing::RecordingSink;

using testing::GlobalGradNorm;
using testing::MaxGradDifference;

class GradientAccumulationTest : public testing::TinyJobTest {
 protected:
  std::shared_ptr<TrainableModel> Model(std::uint64_t seed = 11) {
    torch::manual_seed(seed);
    return BuildModel(spec_.model, 2, "test");
  }
  // Samples [0, n) split at the given sizes, with a fraction of targets masked per piece.
  std::vector<Batch> Split(const std::vector<int>& sizes, const std::vector<double>& masked,
                           SampleFormat format = SampleFormat::kNextToken) {
    std::vector<Batch> out;
    std::int64_t first = 0;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      Batch b = corpus_->TrainingSamples(5, first, sizes[i], format);
      if (!masked.empty() && masked[i] > 0) {
        torch::manual_seed(100 + static_cast<int>(i));
        b.targets.masked_fill_(torch::rand(b.targets.sizes()) < masked[i],
                               spec_.model.loss.ignore_index);
      }
      out.push_back(b);
      first += sizes[i];
    }
    return out;
  }
  static Batch Concat(const std::vector<Batch>& parts) {
    std::vector<torch::Tensor> inputs, targets;
    for (const auto& p : parts) {
      inputs.push_back(p.inputs);
      targets.push_back(p.targets);
    }
    return {torch::cat(inputs), torch::cat(targets), 0, std::nullopt, {}};
  }
};

TEST_F(GradientAccumulationTest, UnequalMicrobatchesAndMaskedTokensGiveTheLargeBatchGradient) {
  // 10 samples as 4 + 4 + 2, each microbatch with a different share of masked targets.
  const std::vector<Batch> pieces = Split({4, 4, 2}, {0.0, 0.3, 0.7});
  auto accumulated = Model();
  auto large = Model();
  const double loss = AccumulateGradients(*accumulated, pieces, {});
  const double large_loss = AccumulateGradients(*large, {Concat(pieces)}, {});
  EXPECT_NEAR(loss, large_loss, 1e-6);
  EXPECT_LE(MaxGradDifference(*accumulated, *large), 1e-6);
  EXPECT_GT(GlobalGradNorm(*large), 0.1);
}

TEST_F(GradientAccumulationTest, OmittingTheDivisionIsCaughtByTheSameComparison) {
  // The classic bug: each microbatch's mean loss backpropagated as is, with no division by
  // the number of microbatches. The accumulated gradient is then 4x the right one.
  const std::vector<Batch> pieces = Split({2, 2, 2, 2}, {});
  auto buggy = Model();
  for (const Batch& b : pieces) {
    const LossTerms terms = buggy->Loss(buggy->forward(b.inputs), b.targets);
    (terms.sum / static_cast<double>(terms.count)).backward();
  }
  auto large = Model();
  AccumulateGradients(*large, {Concat(pieces)}, {});
  EXPECT_NEAR(GlobalGradNorm(*buggy) / GlobalGradNorm(*large), 4.0, 1e-3);
  EXPECT_GT(MaxGradDifference(*buggy, *large), 1e-3);
}

TEST_F(GradientAccumulationTest, ClippingRunsOncePerUpdateOnTheAccumulatedGradient) {
  const std::vector<Batch> pieces = Split({2, 2, 2, 2}, {});
  const double clip = 0.05;
  auto model = Model();
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  AccumulateGradients(*model, pieces, {});
  const StepResult step = UnscaleClipStep(model->parameters(), optimizer, clip, {});
  ASSERT_GT(step.grad_norm, clip);  // the clip is active
  // After the update the gradient left in .grad is the accumulated one scaled to `clip`.
  EXPECT_NEAR(GlobalGradNorm(*model), clip, 1e-6);

  // Clipping each microbatch instead: four clipped pieces sum to a gradient whose norm is
  // not the clip norm, and the parameters after the step differ.
  auto per_microbatch = Model();
  torch::optim::SGD optimizer2(per_microbatch->parameters(), torch::optim::SGDOptions(0.1));
  std::vector<torch::Tensor> sum;
  for (const Batch& b : pieces) {
    per_microbatch->zero_grad();
    AccumulateGradients(*per_microbatch, {b}, {});
    torch::nn::utils::clip_grad_norm_(per_microbatch->parameters(), clip);
    const auto params = per_microbatch->parameters();
    for (std::size_t i = 0; i < params.size(); ++i) {
      const torch::Tensor piece = params[i].grad().clone() / 4;
      if (sum.size() <= i)
        sum.push_back(piece);
      else
        sum[i] += piece;
    }
  }
  const auto params = per_microbatch->parameters();
  for (std::size_t i = 0; i < params.size(); ++i) params[i].mutable_grad() = sum[i];
  EXPECT_GT(std::fabs(GlobalGradNorm(*per_microbatch) - clip), 1e-4);
  optimizer2.step();
  EXPECT_GT(testing::MaxParameterDifference(*model, *per_microbatch), 1e-6);
}

TEST_F(GradientAccumulationTest, AccumulationKeepsTheScheduleAndTheLossCurve) {
  // Twenty updates, dropout 0: 4 microbatches of 2 against a real batch of 8.
  spec_.training.updates = 20;
  spec_.plan = {2, 4, {}, Precision::kFp32};
  RecordingSink accumulated_sink;
  Trainer accumulated(spec_, *corpus_, &accumulated_sink);
  JobSpec large_spec = spec_;
  large_spec.plan = {8, 1, {}, Precision::kFp32};
  RecordingSink large_sink;
  Trainer large(large_spec, *corpus_, &large_sink);
  // The learning rate the optimizer stepped with, read back from it.
  auto stepped_lr = [](Trainer& trainer) {
    return static_cast<torch::optim::AdamWOptions&>(
               trainer.model_state().optimizer().param_groups().front().options())
        .lr();
  };
  std::vector<double> rates;
  for (int u = 0; u < 20; ++u) {
    const UpdateStats a = accumulated.TrainUpdate(u);
    const UpdateStats b = large.TrainUpdate(u);
    // Once per optimizer update: the schedule at update u, not at u * accumulation steps.
    EXPECT_EQ(stepped_lr(accumulated), LearningRateAt(spec_.optimizer, spec_.schedule, u, 20))
        << "update " << u;
    EXPECT_EQ(stepped_lr(accumulated), stepped_lr(large)) << "update " << u;
    EXPECT_NEAR(a.loss, b.loss, 1e-4) << "update " << u;
    rates.push_back(a.lr);
  }
  EXPECT_NE(rates[1], rates[2]);  // warm-up: the schedule moves, so the check can fail
  EXPECT_LE(testing::MaxParameterDifference(accumulated.model(), large.model()), 1e-4);

  // The check does fail for a loop that advances the schedule per microbatch.
  Trainer faulty(spec_, *corpus_, &accumulated_sink);
  faulty.set_test_only_fault(TrainingFault::kLrPerMicrobatch);
  faulty.TrainUpdate(1);
  EXPECT_NE(stepped_lr(faulty), LearningRateAt(spec_.optimizer, spec_.schedule, 1, 20));
}

TEST_F(GradientAccumulationTest, BatchNormWarnsAndIsNotEquivalentToALargeBatch) {
  spec_.model = MlpModelSpec({16, 2, /*batch_norm=*/true, 0.0}, spec_.model.block_size);
  const std::vector<Batch> pieces = Split({4, 4}, {}, SampleFormat::kSliceOfWindow);
  auto accumulated = Model();
  auto large = Model();
  AccumulateGradients(*accumulated, pieces, {});
  AccumulateGradients(*large, {Concat(pieces)}, {});
  EXPECT_GT(MaxGradDifference(*accumulated, *large), 1e-4);

  // Control: without BatchNorm the same comparison holds to rounding.
  spec_.model.options["batch_norm"] = false;
  auto plain_accumulated = Model();
  auto plain_large = Model();
  AccumulateGradients(*plain_accumulated, pieces, {});
  AccumulateGradients(*plain_large, {Concat(pieces)}, {});
  EXPECT_LE(MaxGradDifference(*plain_accumulated, *plain_large), 1e-6);

  spec_.model.options["batch_norm"] = true;
  spec_.training.updates = 1;
  spec_.plan = {4, 2, {}, Precision::kFp32};
  RecordingSink sink;
  testing::TempDir dir;
  Trainer trainer(spec_, *corpus_, &sink);
  TrainerOptions options;
  options.checkpoint_path = dir.File("c.pt");
  options.model_path = dir.File("m.pt");
  ASSERT_TRUE(trainer.Run(options).ok());
  const auto warnings = sink.JobWarnings();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0]["kind"], "batch_norm_accumulation");
}

}  // namespace
}  // namespace trainerd
