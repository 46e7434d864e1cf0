// Activations in host memory (plan offload_activations, activation_offload.h), on the tiny GPT
// with the CPU simulating an accelerator (memory.simulated_device): the same updates as the
// blocks' activations kept on the device, bit for bit, in fp32 and bf16; the ledger's
// activations leave the device for its host part and its peak falls; the parity check passes
// the plan and rejects a stale restore, in fp32 and bf16.
#include "trainerd/trainer/semantics/activation_offload.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <string>

#include "../support/cuda_test.h"
#include "../support/parity_expectations.h"
#include "../support/tiny_job_test.h"
#include "trainerd/trainer/loop/trainer.h"
#include "trainerd/trainer/plan/memory_ledger.h"
#include "trainerd/trainer/plan/parity.h"

namespace trainerd {
namespace {

class OffloadTest : public testing::TinyJobTest {
 protected:
  // The tiny job in microbatches of `microbatch`, nothing checkpointed.
  JobSpec Plan(Precision precision, int microbatch, bool offload) const {
    JobSpec spec = spec_;
    spec.memory.simulated_device = true;
    spec.plan = {microbatch, spec.training.effective_batch / microbatch, {}, precision};
    spec.plan.offload_activations = offload;
    return spec;
  }

  // Four updates kept and offloaded side by side: the same losses, norms and weights, exactly.
  void ExpectTheSameUpdates(const JobSpec& kept_spec, const JobSpec& moved_spec) {
    NullEventSink discard;
    Trainer kept(kept_spec, *corpus_, &discard);
    Trainer moved(moved_spec, *corpus_, &discard);
    for (int update = 0; update < 4; ++update) {
      const UpdateStats want = kept.TrainUpdate(update);
      const UpdateStats got = moved.TrainUpdate(update);
      EXPECT_EQ(got.loss, want.loss) << "update " << update;
      EXPECT_EQ(got.grad_norm, want.grad_norm) << "update " << update;
      EXPECT_EQ(OffloadedActivationBytes(), 0) << "host copies outlived their backward";
    }
    const auto want = NamedTrainableParameters(kept.model());
    const auto got = NamedTrainableParameters(moved.model());
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < want.size(); ++i) {
      EXPECT_TRUE(torch::equal(got[i].value().cpu(), want[i].value().cpu())) << want[i].key();
    }
  }
};

TEST_F(OffloadTest, TrainsTheUpdatesOfTheActivationsOnTheDeviceBitForBit) {
  for (const Precision precision : {Precision::kFp32, Precision::kBf16}) {
    SCOPED_TRACE(ToString(precision));
    ExpectTheSameUpdates(Plan(precision, 4, false), Plan(precision, 4, true));
  }
}

// One block checkpointed, the other offloaded: the checkpointed block recomputes as before.
TEST_F(OffloadTest, ACheckpointedBlockBesideAnOffloadedOneTrainsTheSame) {
  JobSpec kept = Plan(Precision::kFp32, 4, false), moved = Plan(Precision::kFp32, 4, true);
  kept.plan.checkpoint_blocks = moved.plan.checkpoint_blocks = {1};
  ExpectTheSameUpdates(kept, moved);
}

TEST_F(OffloadTest, TheLedgerShowsTheBlocksActivationsOnTheHostAndItsPeakFalls) {
  const Result<MemoryLedger> kept = MeasureLedger(Plan(Precision::kFp32, 8, false), *corpus_);
  const Result<MemoryLedger> moved = MeasureLedger(Plan(Precision::kFp32, 8, true), *corpus_);
  ASSERT_TRUE(kept.ok()) << kept.status().message();
  ASSERT_TRUE(moved.ok()) << moved.status().message();
  ASSERT_FALSE(kept->host.has_value());
  ASSERT_TRUE(moved->host.has_value());
  const std::int64_t left_the_device = kept->activations_bytes - moved->activations_bytes;
  std::int64_t blocks = 0;
  for (const BlockActivation& b : kept->blocks) blocks += b.activation_bytes;
  // The blocks' activations leave the device (all but the last block's output, which the
  // output layer reads), and the host holds at least what left.
  EXPECT_GE(left_the_device, blocks * 8 / 10)
      << "kept " << kept->activations_bytes << ", offloaded " << moved->activations_bytes;
  EXPECT_GE(moved->host->activations_bytes, left_the_device);
  EXPECT_GE(moved->host->peak_bytes, moved->host->activations_bytes);
  EXPECT_FALSE(moved->host->in_device_count);
  EXPECT_LT(moved->peak_bytes, kept->peak_bytes);
  const std::string table = LedgerTable(*moved);
  EXPECT_NE(table.find("plan offload_activations"), std::string::npos) << table;
  EXPECT_NE(table.find("outside the device budget"), std::string::npos) << table;
}

// Two microbatches per update: with the fault the second restores the first's activations.
TEST_F(OffloadTest, ParityPassesThePlanAndRejectsAStaleRestore) {
  for (const Precision precision : {Precision::kFp32, Precision::kBf16}) {
    SCOPED_TRACE(ToString(precision));
    testing::ExpectParityPassesAndRejects(Plan(precision, 4, true), *corpus_,
                                          TrainingFault::kOffloadRestoredStale);
  }
}

using OffloadCudaTest = testing::CudaTestOf<OffloadTest>;

// On the GPU: the copies out on their own stream, back from pinned memory; the same updates
// as the activations kept on the device (exactly: the same kernels on the same values).
TEST_F(OffloadCudaTest, TrainsTheUpdatesOfTheActivationsOnTheDeviceOnTheGpu) {
  for (const Precision precision : {Precision::kFp32, Precision::kBf16}) {
    SCOPED_TRACE(ToString(precision));
    JobSpec kept = Plan(precision, 4, false), moved = Plan(precision, 4, true);
    for (JobSpec* spec : {&kept, &moved}) {
      spec->runtime.device = "cuda";
      spec->memory.simulated_device = false;
    }
    ExpectTheSameUpdates(kept, moved);
  }
}

}  // namespace
}  // namespace trainerd
