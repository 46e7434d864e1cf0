#include "trainerd/trainer/device_memory.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "../support/tiny_job.h"
#include "trainerd/trainer/trainer.h"

namespace trainerd {
namespace {

class DeviceMemoryTest : public ::testing::Test {
 protected:
  void TearDown() override { memory_.SetLimit(0); }
  DeviceMemory& memory_ = MemoryOf(torch::kCPU);
};

TEST_F(DeviceMemoryTest, CountsLiveAndPeakBytesOfTensors) {
  const std::int64_t before = memory_.live_bytes();
  memory_.ResetPeak();
  {
    const torch::Tensor t = torch::empty({1024, 256}, torch::kFloat);  // 1 MiB
    EXPECT_EQ(memory_.live_bytes() - before, 1 << 20);
  }
  EXPECT_EQ(memory_.live_bytes(), before);
  EXPECT_GE(memory_.peak_bytes() - before, 1 << 20);
}

TEST_F(DeviceMemoryTest, AllocationBeyondTheLimitIsAnOutOfMemoryErrorAndLeavesNothingBehind) {
  const std::int64_t baseline = memory_.live_bytes();
  memory_.SetLimit(baseline + (4 << 20));
  const torch::Tensor fits = torch::empty({1 << 20}, torch::kFloat);  // 4 MiB: exactly at the limit
  EXPECT_THROW(torch::empty({1}, torch::kFloat), c10::OutOfMemoryError);
  EXPECT_EQ(memory_.live_bytes(), baseline + (4 << 20));
}

TEST_F(DeviceMemoryTest, AnUpdateThatOomsReleasesEverythingItAllocated) {
  JobSpec spec = testing::TinyGptJob();
  Result<TextCorpus> corpus = TextCorpus::Load(spec.data, spec.model.gpt.block_size);
  ASSERT_TRUE(corpus.ok());
  class Discard : public EventSink {
    void Emit(const nlohmann::json&) override {}
  } discard;
  Trainer trainer(spec, *corpus, &discard);
  trainer.TrainUpdate(0);  // gradients and optimizer state exist from here on
  const std::int64_t baseline = memory_.live_bytes();
  memory_.SetLimit(baseline + (256 << 10));  // far less than one forward needs
  EXPECT_THROW(trainer.TrainUpdate(1), c10::OutOfMemoryError);
  EXPECT_EQ(memory_.live_bytes(), baseline);
  // And training continues once the budget allows it.
  memory_.SetLimit(0);
  EXPECT_TRUE(std::isfinite(trainer.TrainUpdate(1).loss));
}

}  // namespace
}  // namespace trainerd
