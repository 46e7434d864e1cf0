// The model state of a plan that keeps the optimizer state on the host (StatePlacement::kHost,
// docs/model-state.md): fp32 master copies of the model's parameters in host memory
// (HostMemoryScope), each with a host gradient, and AdamW's state, which the optimizer built
// over them allocates there when it steps. Per update, after the last microbatch:
// PullGradients (the device's gradients to the host), the unscale, clip and step on the
// host, PushWeights (the host's weights to the device). The device keeps the parameters and
// their gradients; the arithmetic is the step's on the same values, so the result is the
// device step's, bit for bit on the CPU.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "trainerd/trainer/loop/model_state.h"
#include "trainerd/trainer/spec/job_spec.h"

namespace trainerd {

class HostModelState final : public ModelState {
 public:
  // Host copies of `model`'s trainable parameters (on `device`), and AdamW over them.
  HostModelState(TrainableModel& model, const torch::Device& device, const OptimizerSpec& spec);

  // The master weights, each with its gradient once pulled: what the optimizer steps.
  torch::OrderedDict<std::string, torch::Tensor> stepped() const override { return named_; }
  // PullGradients, the step on the host, PushWeights.
  StepResult Step(const StepOptions& options) override;
  StepResult MeasureSkipped(const BeforeClip& before_clip) override;
  void Count(MemorySnapshot* snapshot) const override;
  std::optional<HostLedger> HostBytes(const MemorySpec& memory) const override;
  std::optional<std::string> HostBudgetRefusal(const MemorySpec& memory,
                                               DataParallelGroup* group) const override;
  // The device's parameters into the masters.
  void AdoptModelWeights() override;
  // Everything loaded in host memory, then the parameters moved to the device.
  Result<CheckpointState> LoadCheckpoint(const std::string& path,
                                         const std::string& job_identity) override;

 private:
  // The device's gradients into the masters' (a parameter without one keeps none).
  void PullGradients();
  // The masters' values into the device's parameters.
  void PushWeights();

  std::vector<torch::Tensor> device_parameters_;
  std::vector<torch::Tensor> host_;
  torch::OrderedDict<std::string, torch::Tensor> named_;
};

// Host bytes a plan of `parameter_bytes` needs with the optimizer state on the host: the fp32
// master weights, their gradients and AdamW's two moments (four fp32 copies).
std::int64_t HostStateBytes(std::int64_t parameter_bytes);

// What host memory model state may fill: memory.host_budget, or when it is not set what the
// host has available now (MemAvailable) plus what this process already keeps there.
std::int64_t HostBudgetBytes(const MemorySpec& memory);

// Why a model of `parameter_bytes` cannot keep its optimizer state on the host within
// `memory`'s host budget ("keeping the optimizer state on the host needs X of host memory
// ..., more than the host budget of Y (memory.host_budget)"); nullopt when it can.
std::optional<std::string> HostStateRefusal(std::int64_t parameter_bytes, const MemorySpec& memory);

}  // namespace trainerd
