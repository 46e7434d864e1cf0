#include "trainerd/trainer/loop/training_checkpoint.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <string_view>

#include "../support/cuda_test.h"
#include "../support/temp_dir.h"
#include "../support/tiny_job_spec.h"
#include "trainerd/trainer/device/torch_compat.h"
#include "trainerd/trainer/models/build_model.h"

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
  s.model = BuildModel(testing::TinyGptJob().model, 2, "test");
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
  fresh->model = BuildModel(testing::TinyGptJob().model, 2, "test");
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

// A checkpoint of StepOnce's model as bytes, and the archive's folder name inside it.
std::string CheckpointBytes(const testing::TempDir& dir) {
  Stepped written = StepOnce(torch::kCPU);
  Status saved = SaveTrainingCheckpoint(dir.File("c.pt"), *written.model, *written.optimizer,
                                        {3, "job", std::nullopt, 0}, torch::kCPU);
  EXPECT_TRUE(saved.ok()) << saved.message();
  return testing::ReadFile(dir.File("c.pt"));
}

std::uint32_t Crc32(std::string_view data) {
  std::uint32_t crc = 0xffffffffu;
  for (const char c : data) {
    crc ^= static_cast<unsigned char>(c);
    for (int k = 0; k < 8; ++k) crc = (crc & 1) != 0 ? 0xedb88320u ^ (crc >> 1) : crc >> 1;
  }
  return ~crc;
}

std::uint32_t Le32(const std::string& bytes, std::size_t at) {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = v << 8 | static_cast<unsigned char>(bytes[at + i]);
  return v;
}

void PutLe32(std::string& bytes, std::size_t at, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) bytes[at + i] = static_cast<char>(v >> (8 * i) & 0xff);
}

// Rewrites the first stored (uncompressed) record whose data contains `text` so that it holds
// `replacement` (same length) instead, with both of the zip's CRC-32 fields made to match:
// an archive that is damaged only in meaning. False when there is no such record.
bool RewriteStoredRecord(std::string& bytes, const std::string& text,
                         const std::string& replacement) {
  const std::size_t end = bytes.size() - 22;  // LibTorch writes no archive comment
  std::size_t cd = Le32(bytes, end + 16);
  for (std::uint32_t i = 0; i < (Le32(bytes, end + 8) >> 16); ++i) {
    const std::uint32_t size = Le32(bytes, cd + 24);
    const std::uint32_t local = Le32(bytes, cd + 42);
    const bool stored = (Le32(bytes, cd + 8) >> 16) == 0;  // compression method
    const std::size_t data =
        local + 30 + (Le32(bytes, local + 26) & 0xffff) + (Le32(bytes, local + 26) >> 16);
    const std::size_t at = stored ? bytes.substr(data, size).find(text) : std::string::npos;
    if (at != std::string::npos) {
      bytes.replace(data + at, replacement.size(), replacement);
      const std::uint32_t crc = Crc32(std::string_view(bytes).substr(data, size));
      PutLe32(bytes, local + 14, crc);
      PutLe32(bytes, cd + 16, crc);
      return true;
    }
    cd += 46 + (Le32(bytes, cd + 28) & 0xffff) + (Le32(bytes, cd + 28) >> 16) +
          (Le32(bytes, cd + 32) & 0xffff);
  }
  return false;
}

// Found by tests/fuzz/training_checkpoint_fuzzer: a few bytes changed in the archive made
// LibTorch 1.13 either throw torch::jit::ErrorReport (no c10::Error: it escaped the loader)
// or crash with SIGSEGV in its TorchScript parser. LibTorch checks no CRC; the loader now does.
TEST(TrainingCheckpointTest, ADamagedArchiveIsCorruptionAndNeverReachesLibTorch) {
  testing::TempDir dir;
  const std::string intact = CheckpointBytes(dir);
  for (const std::string& record : {std::string("class "), std::string("rng")}) {
    std::string bytes = intact;
    const std::size_t at = bytes.find(record);
    ASSERT_NE(at, std::string::npos) << record;
    bytes[at] ^= 0x20;
    std::ofstream(dir.File("c.pt"), std::ios::binary | std::ios::trunc) << bytes;
    Stepped resumed;
    Result<CheckpointState> state = CheckpointState{};
    ASSERT_NO_THROW(state = LoadAndStep(dir.File("c.pt"), torch::kCPU, &resumed));
    ASSERT_FALSE(state.ok());
    EXPECT_EQ(state.status().code(), Status::Code::kCorruption);
    EXPECT_EQ(
        state.status().message().rfind(dir.File("c.pt") + ": damaged checkpoint archive: ", 0), 0u)
        << state.status().message();
  }
  for (std::size_t size : {std::size_t{0}, std::size_t{21}, intact.size() / 2, intact.size() - 1}) {
    std::ofstream(dir.File("c.pt"), std::ios::binary | std::ios::trunc) << intact.substr(0, size);
    Stepped resumed;
    Result<CheckpointState> state = LoadAndStep(dir.File("c.pt"), torch::kCPU, &resumed);
    EXPECT_EQ(state.status().code(), Status::Code::kCorruption) << "truncated to " << size;
  }
}

// The same finding with the CRCs made to match: LibTorch's torch::jit::ErrorReport on a code
// record that is not TorchScript comes back as Corruption too.
TEST(TrainingCheckpointTest, ATorchScriptErrorInAnIntactArchiveIsCorruption) {
  testing::TempDir dir;
  std::string bytes = CheckpointBytes(dir);
  ASSERT_TRUE(RewriteStoredRecord(bytes, "class ", "Zlass "));
  std::ofstream(dir.File("c.pt"), std::ios::binary | std::ios::trunc) << bytes;
  Stepped resumed;
  Result<CheckpointState> state = CheckpointState{};
  ASSERT_NO_THROW(state = LoadAndStep(dir.File("c.pt"), torch::kCPU, &resumed));
  ASSERT_FALSE(state.ok());
  EXPECT_EQ(state.status().code(), Status::Code::kCorruption);
  EXPECT_NE(state.status().message().find(": cannot read checkpoint: "), std::string::npos)
      << state.status().message();
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
