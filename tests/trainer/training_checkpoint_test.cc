#include "trainerd/trainer/training_checkpoint.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "../support/cuda_test.h"
#include "../support/temp_dir.h"
#include "../support/tiny_job.h"
#include "trainerd/trainer/model.h"
#include "trainerd/trainer/torch_compat.h"

namespace trainerd {
namespace {

// A model and its AdamW on `device`, after one step so the optimizer has state.
struct Stepped {
  std::shared_ptr<TrainableModel> model;
  std::unique_ptr<torch::optim::AdamW> optimizer;
};

Stepped StepOnce(const torch::Device& device) {
  torch::manual_seed(11);
  Stepped s;
  s.model = BuildModel(testing::TinyGptJob().model, 2);
  s.model->to(device);
  s.optimizer = std::make_unique<torch::optim::AdamW>(s.model->parameters(),
                                                      torch::optim::AdamWOptions(1e-3));
  const torch::Tensor tokens =
      torch::randint(0, 256, {2, 8}, torch::TensorOptions().dtype(torch::kLong).device(device));
  s.model->forward(tokens).to(torch::kFloat).square().mean().backward();
  s.optimizer->step();
  return s;
}

std::vector<torch::Device> OptimizerStateDevices(const torch::optim::Optimizer& optimizer) {
  std::vector<torch::Device> devices;
  for (const auto& entry : optimizer.state()) {
    const auto& state = static_cast<const torch::optim::AdamWParamState&>(*entry.second);
    devices.push_back(state.exp_avg().device());
    devices.push_back(state.exp_avg_sq().device());
  }
  return devices;
}

// Loads `path` into a fresh model and optimizer on `device` and takes one more step there:
// the step fails if any tensor stayed on the writing device.
Result<CheckpointState> LoadAndStep(const std::string& path, const torch::Device& device,
                                    Stepped* fresh) {
  torch::manual_seed(12);
  fresh->model = BuildModel(testing::TinyGptJob().model, 2);
  fresh->model->to(device);
  fresh->optimizer = std::make_unique<torch::optim::AdamW>(fresh->model->parameters(),
                                                           torch::optim::AdamWOptions(1e-3));
  Result<CheckpointState> state =
      LoadTrainingCheckpoint(path, *fresh->model, *fresh->optimizer, "job", device);
  if (!state.ok()) return state;
  const torch::Tensor tokens =
      torch::randint(0, 256, {2, 8}, torch::TensorOptions().dtype(torch::kLong).device(device));
  fresh->model->forward(tokens).to(torch::kFloat).square().mean().backward();
  fresh->optimizer->step();
  return state;
}

// Steps once on `written_on`, checkpoints that as 3 updates done, and resumes on `resumed_on`.
Result<CheckpointState> CheckpointAndResume(const torch::Device& written_on,
                                            const torch::Device& resumed_on, Stepped* resumed) {
  testing::TempDir dir;
  Stepped written = StepOnce(written_on);
  Status saved = SaveTrainingCheckpoint(dir.File("c.pt"), *written.model, *written.optimizer,
                                        {3, "job", std::nullopt, 0}, written_on);
  if (!saved.ok()) return saved;
  return LoadAndStep(dir.File("c.pt"), resumed_on, resumed);
}

TEST(TrainingCheckpointTest, RecordsTheDeviceAndLoadsEveryTensorOntoTheTrainingDevice) {
  Stepped resumed;
  Result<CheckpointState> state = CheckpointAndResume(torch::kCPU, torch::kCPU, &resumed);
  ASSERT_TRUE(state.ok()) << state.status().message();
  EXPECT_EQ(state->written_on, "cpu");
  EXPECT_EQ(state->updates_done, 3);
  const auto devices = OptimizerStateDevices(*resumed.optimizer);
  EXPECT_FALSE(devices.empty());
  for (const auto& d : devices) EXPECT_TRUE(d.is_cpu()) << d.str();
}

TEST(TrainingCheckpointTest, ACheckpointFromBeforeTheDeviceWasRecordedReadsAsWrittenOnTheCpu) {
  // The format of the checkpoints earlier releases wrote (no "device", no "rng_cuda").
  testing::TempDir dir;
  Stepped written = StepOnce(torch::kCPU);
  torch::serialize::OutputArchive archive, model_archive, optimizer_archive;
  archive.write("format_version", torch::tensor(std::int64_t{1}));
  archive.write("updates_done", torch::tensor(std::int64_t{5}));
  archive.write("job_identity", c10::IValue(std::string("job")));
  archive.write("rng_cpu", compat::CaptureRng(torch::kCPU).cpu);
  written.model->save(model_archive);
  archive.write("model", model_archive);
  written.optimizer->save(optimizer_archive);
  archive.write("optimizer", optimizer_archive);
  archive.save_to(dir.File("old.pt"));

  Stepped resumed;
  Result<CheckpointState> state = LoadAndStep(dir.File("old.pt"), torch::kCPU, &resumed);
  ASSERT_TRUE(state.ok()) << state.status().message();
  EXPECT_EQ(state->written_on, "cpu");
  EXPECT_EQ(state->updates_done, 5);
}

class CudaCheckpointTest : public testing::CudaTest {};

TEST_F(CudaCheckpointTest, WrittenOnCudaResumesOnTheCpuWithItsAdamWStateMoved) {
  Stepped resumed;
  Result<CheckpointState> state = CheckpointAndResume(cuda_, torch::kCPU, &resumed);
  ASSERT_TRUE(state.ok()) << state.status().message();
  EXPECT_EQ(state->written_on, "cuda");
  for (const auto& d : OptimizerStateDevices(*resumed.optimizer)) EXPECT_TRUE(d.is_cpu());
}

TEST_F(CudaCheckpointTest, WrittenOnTheCpuResumesOnCudaWithItsAdamWStateMoved) {
  Stepped resumed;
  Result<CheckpointState> state = CheckpointAndResume(torch::kCPU, cuda_, &resumed);
  ASSERT_TRUE(state.ok()) << state.status().message();
  EXPECT_EQ(state->written_on, "cpu");
  for (const auto& d : OptimizerStateDevices(*resumed.optimizer)) EXPECT_TRUE(d.is_cuda());
}

TEST_F(CudaCheckpointTest, TheCudaGeneratorContinuesWhereTheCheckpointLeftIt) {
  testing::TempDir dir;
  Stepped written = StepOnce(cuda_);
  ASSERT_TRUE(SaveTrainingCheckpoint(dir.File("c.pt"), *written.model, *written.optimizer,
                                     {1, "job", std::nullopt, 0}, cuda_)
                  .ok());
  const torch::Tensor after_save = torch::rand({64}, torch::TensorOptions().device(cuda_));
  torch::manual_seed(99);  // the generator moves on, as in another process
  ASSERT_TRUE(
      LoadTrainingCheckpoint(dir.File("c.pt"), *written.model, *written.optimizer, "job", cuda_)
          .ok());
  const torch::Tensor after_load = torch::rand({64}, torch::TensorOptions().device(cuda_));
  EXPECT_TRUE(torch::equal(after_save, after_load));
}

}  // namespace
}  // namespace trainerd
