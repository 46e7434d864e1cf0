#include "trainerd/trainer/loop/training_checkpoint.h"

#include <torch/serialize.h>

#include <filesystem>

#include "loop/zip_check.h"
#include "trainerd/common/atomic_file.h"
#include "trainerd/trainer/device/device_memory.h"
#include "trainerd/trainer/device/torch_compat.h"

namespace trainerd {
namespace {

constexpr std::int64_t kFormatVersion = 1;

}  // namespace

Status SaveTrainingCheckpoint(const std::string& path, torch::nn::Module& model,
                              torch::optim::Optimizer& optimizer, const CheckpointState& state,
                              const torch::Device& device) {
  TemporaryFile temporary(path);
  try {
    torch::serialize::OutputArchive archive;
    archive.write("format_version", torch::tensor(kFormatVersion));
    archive.write("updates_done", torch::tensor(static_cast<std::int64_t>(state.updates_done)));
    archive.write("job_identity", c10::IValue(state.job_identity));
    archive.write("device", c10::IValue(c10::DeviceTypeName(device.type(), /*lower_case=*/true)));
    const compat::RngState rng = compat::CaptureRng(device);
    archive.write("rng_cpu", rng.cpu);
    if (rng.cuda.defined()) archive.write("rng_cuda", rng.cuda);
    if (state.loss_scale) {
      archive.write("loss_scale", torch::tensor(*state.loss_scale, torch::kDouble));
      archive.write("loss_scale_clean_updates",
                    torch::tensor(static_cast<std::int64_t>(state.clean_updates)));
    }
    torch::serialize::OutputArchive model_archive;
    model.save(model_archive);
    archive.write("model", model_archive);
    torch::serialize::OutputArchive optimizer_archive;
    optimizer.save(optimizer_archive);
    archive.write("optimizer", optimizer_archive);
    archive.save_to(temporary.path());
  } catch (const c10::Error& e) {
    return Status::IOError(path + ": cannot write checkpoint: " + e.what_without_backtrace());
  }
  return temporary.Commit();
}

namespace {

// LoadTrainingCheckpoint with the file's tensors loaded on `tensors_on`.
Result<CheckpointState> Load(const std::string& path, torch::nn::Module& model,
                             torch::optim::Optimizer& optimizer,
                             const std::string& expected_identity, const torch::Device& device,
                             const torch::Device& tensors_on) {
  if (!std::filesystem::exists(path)) return Status::NotFound(path + ": no training checkpoint");
  // LibTorch does not check the archive's CRCs and may crash on a damaged one.
  if (Status intact = VerifyZipChecksums(path); !intact.ok()) return intact;
  CheckpointState state;
  try {
    torch::serialize::InputArchive archive;
    // Every tensor (parameters, AdamW moments) lands on `tensors_on`, whichever device wrote
    // the file.
    archive.load_from(path, tensors_on);
    torch::Tensor version;
    archive.read("format_version", version);
    if (version.item<std::int64_t>() != kFormatVersion) {
      return Status::Corruption(path + ": checkpoint format " +
                                std::to_string(version.item<std::int64_t>()) + ", expected " +
                                std::to_string(kFormatVersion));
    }
    c10::IValue identity;
    archive.read("job_identity", identity);
    state.job_identity = identity.toStringRef();
    if (state.job_identity != expected_identity) {
      return Status::FailedPrecondition(path + ": checkpoint belongs to another job (identity " +
                                        state.job_identity.substr(0, 12) + ", this job is " +
                                        expected_identity.substr(0, 12) +
                                        "): model, data, optimizer, schedule or batch changed");
    }
    c10::IValue written_on;
    if (archive.try_read("device", written_on)) state.written_on = written_on.toStringRef();
    torch::Tensor updates, cuda_rng;
    archive.read("updates_done", updates);
    // The training device's generators, overwritten with what the file has: a CUDA stream
    // continues only on CUDA, and one written on another device keeps the current state.
    compat::RngState rng = compat::CaptureRng(device);
    archive.read("rng_cpu", rng.cpu);
    rng.cpu = rng.cpu.cpu();
    if (rng.cuda.defined() && archive.try_read("rng_cuda", cuda_rng)) rng.cuda = cuda_rng.cpu();
    state.updates_done = static_cast<int>(updates.item<std::int64_t>());
    torch::serialize::InputArchive model_archive;
    archive.read("model", model_archive);
    model.load(model_archive);
    torch::serialize::InputArchive optimizer_archive;
    archive.read("optimizer", optimizer_archive);
    optimizer.load(optimizer_archive);
    compat::RestoreRng(rng);
    torch::Tensor scale, clean;
    if (archive.try_read("loss_scale", scale) &&
        archive.try_read("loss_scale_clean_updates", clean)) {
      state.loss_scale = scale.item<double>();
      state.clean_updates = static_cast<int>(clean.item<std::int64_t>());
    }
  } catch (const c10::Error& e) {
    return Status::Corruption(path + ": cannot read checkpoint: " + e.what_without_backtrace());
  } catch (const std::exception& e) {
    // Not every LibTorch error is a c10::Error: a damaged TorchScript file in the archive
    // throws torch::jit::ErrorReport (found by tests/fuzz/training_checkpoint_fuzzer).
    return Status::Corruption(path + ": cannot read checkpoint: " + e.what());
  }
  return state;
}

}  // namespace

Result<CheckpointState> LoadTrainingCheckpoint(const std::string& path, torch::nn::Module& model,
                                               torch::optim::Optimizer& optimizer,
                                               const std::string& expected_identity,
                                               const torch::Device& device) {
  return Load(path, model, optimizer, expected_identity, device, device);
}

Result<CheckpointState> LoadTrainingCheckpointThroughHost(const std::string& path,
                                                          torch::nn::Module& model,
                                                          torch::optim::Optimizer& optimizer,
                                                          const std::string& expected_identity,
                                                          const torch::Device& device) {
  Result<CheckpointState> state = [&] {
    const HostMemoryScope host;
    return Load(path, model, optimizer, expected_identity, device, torch::kCPU);
  }();
  if (!state.ok()) return state;
  // New storage on the device for every parameter, outside the host scope.
  const torch::NoGradGuard no_grad;
  for (torch::Tensor& p : model.parameters()) {
    p.set_data(p.detach().to(device, /*non_blocking=*/false, /*copy=*/true));
  }
  return state;
}

}  // namespace trainerd
