#include "trainerd/trainer/device/device_memory.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "../support/cuda_test.h"
#include "../support/tiny_job_spec.h"
#include "data/text/text_corpus.h"
#include "trainerd/trainer/loop/trainer.h"

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

// The TorchScript interpreter rethrows an out-of-memory as a std::runtime_error: the watch
// tells it by the allocator's refusal, and another error (no refusal) apart.
TEST_F(DeviceMemoryTest, TheWatchTellsAnOutOfMemoryByTheRefusalNotByTheErrorsType) {
  const std::runtime_error rethrown(
      "The following operation failed in the TorchScript "
      "interpreter ... budget exceeded");
  const OutOfMemoryWatch before_any;
  EXPECT_FALSE(before_any.IsOutOfMemory(rethrown));
  EXPECT_EQ(before_any.StatusOf(rethrown, "x").code(), Status::Code::kInternal);
  const std::int64_t refused = memory_.refused_allocations();
  memory_.SetLimit(memory_.live_bytes() + 1024);
  try {
    (void)torch::empty({1 << 20}, torch::kFloat);
    ADD_FAILURE() << "4 MiB fit a limit of 1 KiB above the live bytes";
  } catch (const c10::OutOfMemoryError& e) {
    EXPECT_TRUE(OutOfMemoryWatch().IsOutOfMemory(e));  // by its type, whenever it began
  }
  EXPECT_EQ(memory_.refused_allocations(), refused + 1);
  EXPECT_TRUE(before_any.IsOutOfMemory(rethrown));
  EXPECT_EQ(before_any.StatusOf(rethrown, "x").code(), Status::Code::kOutOfMemory);
  EXPECT_FALSE(OutOfMemoryWatch().IsOutOfMemory(rethrown));  // the refusal came before it
}

TEST_F(DeviceMemoryTest, AnUpdateThatOomsReleasesEverythingItAllocated) {
  JobSpec spec = testing::TinyGptJob();
  Result<TextCorpus> corpus =
      TextCorpus::Load(spec.data.options.get<TextDataKeys>(), spec.model.block_size);
  ASSERT_TRUE(corpus.ok());
  class Discard : public EventSink {
    void Emit(const WorkerEvent&) override {}
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

TEST_F(DeviceMemoryTest, TheCpuReservesExactlyWhatIsLive) {
  memory_.ResetPeak();
  const torch::Tensor t = torch::empty({1 << 18}, torch::kFloat);  // 1 MiB
  EXPECT_EQ(memory_.reserved_bytes(), memory_.live_bytes());
  EXPECT_EQ(memory_.peak_reserved_bytes(), memory_.peak_bytes());
}

class CudaMemoryTest : public testing::CudaTest {
 protected:
  void TearDown() override {
    if (torch::cuda::is_available()) MemoryOf(cuda_).SetLimit(0);
  }
};

TEST_F(CudaMemoryTest, CountsAllocatedAndReservedBytesAndResetsBothPeaks) {
  DeviceMemory& memory = MemoryOf(cuda_);
  const std::int64_t before = memory.live_bytes();
  memory.ResetPeak();
  {
    const torch::Tensor t =
        torch::empty({64 << 18}, torch::TensorOptions().device(cuda_));  // 64 MiB
    EXPECT_EQ(memory.live_bytes() - before, 64 << 20);
    EXPECT_GE(memory.reserved_bytes(), memory.live_bytes());
  }
  EXPECT_EQ(memory.live_bytes(), before);
  EXPECT_GE(memory.peak_bytes() - before, 64 << 20);
  EXPECT_GE(memory.peak_reserved_bytes(), memory.peak_bytes());
  memory.ResetPeak();
  EXPECT_EQ(memory.peak_bytes(), memory.live_bytes());
  EXPECT_EQ(memory.peak_reserved_bytes(), memory.reserved_bytes());
}

TEST_F(CudaMemoryTest, AllocationBeyondTheLimitIsAnOutOfMemoryError) {
  DeviceMemory& memory = MemoryOf(cuda_);
  memory.SetLimit(256LL << 20);
  EXPECT_EQ(memory.limit(), 256LL << 20);
  EXPECT_THROW(torch::empty({512LL << 18}, torch::TensorOptions().device(cuda_)),  // 512 MiB
               c10::OutOfMemoryError);
  memory.SetLimit(0);
  EXPECT_NO_THROW(torch::empty({512LL << 18}, torch::TensorOptions().device(cuda_)));
}

}  // namespace
}  // namespace trainerd
