// The optimizer step inside the backward (plan step_in_backward, in_backward_model_state.h):
// the same updates as the state on the device (losses, norms, weights within fp32 rounding),
// without and with a clip that binds, in fp32 and bf16; no gradient alive after an update and
// none in the ledger, whose peak falls; the parity check passing the plan and rejecting a
// step taken before the clip, in fp32 and bf16.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "../support/cuda_test.h"
#include "../support/parity_expectations.h"
#include "../support/tiny_job_test.h"
#include "models/mlp/mlp_spec.h"
#include "trainerd/trainer/loop/in_backward_model_state.h"
#include "trainerd/trainer/loop/trainer.h"
#include "trainerd/trainer/plan/memory_ledger.h"
#include "trainerd/trainer/plan/parity.h"

namespace trainerd {
namespace {

// The tiny job's update in one microbatch, clipped at `clip` (0: not clipped).
class InBackwardTest : public testing::TinyJobTest {
 protected:
  JobSpec OneMicrobatch(Precision precision, double clip, bool in_backward) const {
    JobSpec spec = spec_;
    spec.plan = {spec.training.effective_batch, 1, {}, precision};
    spec.plan.step_in_backward = in_backward;
    spec.training.grad_clip = clip;
    return spec;
  }

  // Four updates with the state on the device and with the step inside the backward, side by
  // side: each update's loss and norm, then every weight, within fp32 rounding.
  void ExpectTheSameUpdates(Precision precision, double clip) {
    SCOPED_TRACE(std::string(ToString(precision)) + ", clip " + std::to_string(clip));
    NullEventSink discard;
    Trainer device(OneMicrobatch(precision, clip, false), *corpus_, &discard);
    Trainer in_backward(OneMicrobatch(precision, clip, true), *corpus_, &discard);
    for (int update = 0; update < 4; ++update) {
      const UpdateStats want = device.TrainUpdate(update);
      const UpdateStats got = in_backward.TrainUpdate(update);
      EXPECT_NEAR(got.loss, want.loss, 1e-6 * std::fabs(want.loss)) << "update " << update;
      EXPECT_NEAR(got.grad_norm, want.grad_norm, 1e-6 * want.grad_norm) << "update " << update;
      if (clip > 0) {
        EXPECT_GT(want.grad_norm, clip) << "the clip binds";
      }
    }
    const auto want = NamedTrainableParameters(device.model());
    const auto got = NamedTrainableParameters(in_backward.model());
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < want.size(); ++i) {
      const torch::Tensor w = want[i].value().to(torch::kCPU), g = got[i].value().to(torch::kCPU);
      const double scale = std::max(1e-3, w.abs().max().item<double>());
      EXPECT_LE((g - w).abs().max().item<double>() / scale, 1e-5) << want[i].key();
      EXPECT_FALSE(got[i].value().grad().defined()) << got[i].key() << ": a gradient left alive";
    }
    const std::vector<torch::Tensor> want_buffers = device.model().buffers();
    const std::vector<torch::Tensor> got_buffers = in_backward.model().buffers();
    ASSERT_EQ(got_buffers.size(), want_buffers.size());
    for (std::size_t i = 0; i < want_buffers.size(); ++i) {
      EXPECT_TRUE(torch::allclose(got_buffers[i].to(torch::kCPU), want_buffers[i].to(torch::kCPU),
                                  1e-5, 1e-7))
          << "buffer " << i;
    }
  }
};

TEST_F(InBackwardTest, TrainsTheDeviceStatesUpdatesWithAndWithoutTheClip) {
  for (const Precision precision : {Precision::kFp32, Precision::kBf16}) {
    ExpectTheSameUpdates(precision, 0);
    ExpectTheSameUpdates(precision, 0.05);
  }
}

// BatchNorm's running statistics advance in every forward: with the clip's two passes they
// still advance once per update, as with the state on the device.
TEST_F(InBackwardTest, ABatchNormModelsStatisticsAdvanceOncePerUpdate) {
  spec_.model = MlpModelSpec({64, 2, /*batch_norm=*/true, 0.0}, spec_.model.block_size);
  ExpectTheSameUpdates(Precision::kFp32, 0.05);
}

TEST_F(InBackwardTest, TheLedgerKeepsNoGradientsAndItsPeakFalls) {
  const Result<MemoryLedger> device =
      MeasureLedger(OneMicrobatch(Precision::kFp32, 1.0, false), *corpus_);
  const Result<MemoryLedger> in_backward =
      MeasureLedger(OneMicrobatch(Precision::kFp32, 1.0, true), *corpus_);
  ASSERT_TRUE(device.ok() && in_backward.ok());
  EXPECT_EQ(device->gradients_bytes, device->parameters_bytes);
  EXPECT_EQ(in_backward->gradients_bytes, 0);
  EXPECT_EQ(in_backward->optimizer_state_bytes, device->optimizer_state_bytes);
  EXPECT_LT(in_backward->peak_bytes, device->peak_bytes)
      << "device " << device->peak_bytes << ", in the backward " << in_backward->peak_bytes;
  EXPECT_NE(LedgerTable(*in_backward).find("the optimizer step inside the backward"),
            std::string::npos)
      << LedgerTable(*in_backward);
}

TEST_F(InBackwardTest, ParityPassesThePlanAndRejectsAStepBeforeTheClip) {
  for (const Precision precision : {Precision::kFp32, Precision::kBf16}) {
    SCOPED_TRACE(ToString(precision));
    const JobSpec spec = OneMicrobatch(precision, 0.05, true);
    testing::ExpectParityPassesAndRejects(spec, *corpus_, TrainingFault::kStepBeforeClip);
  }
}

// A fault that acts on the gradients after the backward has none to act on: refused.
TEST_F(InBackwardTest, AFaultOnTheGradientsAfterTheBackwardIsRefused) {
  NullEventSink discard;
  Trainer trainer(OneMicrobatch(Precision::kFp32, 1.0, true), *corpus_, &discard);
  EXPECT_THROW(trainer.set_test_only_fault(TrainingFault::kInfGradient), c10::Error);
  EXPECT_NO_THROW(trainer.set_test_only_fault(TrainingFault::kStepBeforeClip));
}

class InBackwardCudaTest : public testing::CudaTestOf<InBackwardTest> {};

// On a GPU (scripts/device-check.sh): the same updates there, in fp32 and bf16.
TEST_F(InBackwardCudaTest, TrainsTheDeviceStatesUpdatesOnTheGpu) {
  spec_.runtime.device = "cuda";
  for (const Precision precision : {Precision::kFp32, Precision::kBf16}) {
    ExpectTheSameUpdates(precision, 0);
    ExpectTheSameUpdates(precision, 0.05);
  }
}

}  // namespace
}  // namespace trainerd
