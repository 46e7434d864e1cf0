// Training checkpoints: everything needed to continue a job bit-for-bit: model parameters
// and buffers, AdamW state, the fp16 loss-scaler state, the number of updates done (which is also
// the data position and the schedule position), the CPU RNG state and, on CUDA, the device's
// RNG state, the device type that wrote it, and the identity of the job that wrote it. Written
// atomically (temporary file, fsync, rename, fsync of the directory).
//
// A checkpoint resumes on another device type too: every tensor is loaded onto the training
// device (AdamW moments included); the CUDA generator state continues only on CUDA, so a run
// that changes device type continues the same job with other dropout masks.
#pragma once

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <optional>
#include <string>

#include "trainerd/common/status.h"

namespace trainerd {

struct CheckpointState {
  int updates_done = 0;
  std::string job_identity;          // JobIdentity() (spec/job_identity.h) of the job that wrote it
  std::optional<double> loss_scale;  // fp16 dynamic loss scaler state, when the plan had one
  int clean_updates = 0;
  std::string written_on = "cpu";  // device type of the run that wrote it ("cpu", "cuda")
};

// `device` is the training device: its type is recorded and its generators saved.
// state.written_on is ignored (the file records `device`).
Status SaveTrainingCheckpoint(const std::string& path, torch::nn::Module& model,
                              torch::optim::Optimizer& optimizer, const CheckpointState& state,
                              const torch::Device& device);

// Restores model, optimizer and RNG onto `device`. A checkpoint written by another job is
// FailedPrecondition; an unreadable, truncated or damaged file (a record whose CRC-32 does not
// match, checked before LibTorch reads the file) is Corruption; a missing one NotFound.
// Files from before the device was recorded read as written on the CPU.
Result<CheckpointState> LoadTrainingCheckpoint(const std::string& path, torch::nn::Module& model,
                                               torch::optim::Optimizer& optimizer,
                                               const std::string& expected_identity,
                                               const torch::Device& device);
// The same with every tensor loaded in host memory (HostMemoryScope), then the model's
// parameters moved to `device`: the optimizer's state stays on the host, where a plan that
// keeps it there wants it, and the AdamW state of a model whose state does not fit the device
// never passes through it.
Result<CheckpointState> LoadTrainingCheckpointThroughHost(const std::string& path,
                                                          torch::nn::Module& model,
                                                          torch::optim::Optimizer& optimizer,
                                                          const std::string& expected_identity,
                                                          const torch::Device& device);

}  // namespace trainerd
