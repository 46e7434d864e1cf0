#include "trainerd/trainer/loop/host_model_state.h"

#include "trainerd/common/proc_file.h"
#include "trainerd/trainer/device/device_memory.h"
#include "trainerd/trainer/loop/model_state_bytes.h"
#include "trainerd/trainer/spec/units.h"

namespace trainerd {
namespace {

// A host copy of `t`, fp32, in host memory.
torch::Tensor HostCopy(const torch::Tensor& t) {
  const HostMemoryScope host;
  return t.detach().to(torch::kCPU, torch::kFloat, /*non_blocking=*/false, /*copy=*/true);
}

}  // namespace

HostModelState::HostModelState(TrainableModel& model, const torch::Device& device,
                               const OptimizerSpec& spec)
    : ModelState(model, device) {
  for (const auto& item : NamedTrainableParameters(model)) {
    device_parameters_.push_back(item.value());
    host_.push_back(HostCopy(item.value()).requires_grad_(item.value().requires_grad()));
    named_.insert(item.key(), host_.back());
  }
  BuildOptimizer(host_, spec);
}

StepResult HostModelState::Step(const StepOptions& options) {
  const HostMemoryScope host;
  PullGradients();
  const StepResult result = UnscaleClipStep(host_, optimizer(), options.grad_clip,
                                            options.precision, options.before_clip);
  const bool stepped = !result.skipped && !result.nonfinite_gradient;
  if (stepped && options.fault != TrainingFault::kStaleHostWeights) PushWeights();
  return result;
}

StepResult HostModelState::MeasureSkipped(const BeforeClip& before_clip) {
  const HostMemoryScope host;
  PullGradients();  // what the observer reads (stepped)
  return MeasureWithoutStep(host_, before_clip);
}

void HostModelState::Count(MemorySnapshot* snapshot) const {
  snapshot->gradients_bytes = GradientBytes(model_);
  snapshot->host_state_bytes = HostMemoryOfProcess().live_bytes();
}

std::optional<HostLedger> HostModelState::HostBytes(const MemorySpec& memory) const {
  HostLedger ledger;
  for (const torch::Tensor& p : host_) {
    ledger.master_weights_bytes += TensorBytes(p);
    ledger.gradients_bytes += TensorBytes(p.grad());
  }
  ledger.optimizer_state_bytes = AdamWStateBytes(optimizer());
  ledger.budget_bytes = HostBudgetBytes(memory);
  return ledger;
}

std::optional<std::string> HostModelState::HostBudgetRefusal(const MemorySpec& memory,
                                                             DataParallelGroup* group) const {
  std::int64_t parameter_bytes = 0;
  for (const torch::Tensor& p : host_) parameter_bytes += TensorBytes(p);
  std::optional<std::string> refusal = HostStateRefusal(parameter_bytes, memory);
  // Every rank stops where one must: the others would wait for it in the first all-reduce.
  // Every rank has the same plan, so all of them keep their state on the host and ask.
  if (group != nullptr && group->Any(refusal.has_value()) && !refusal) {
    refusal =
        "another rank of this job cannot keep the optimizer state on the host within its "
        "host budget";
  }
  if (refusal) *refusal += ": nothing was trained";
  return refusal;
}

void HostModelState::AdoptModelWeights() {
  const torch::NoGradGuard no_grad;
  for (std::size_t i = 0; i < host_.size(); ++i) host_[i].copy_(device_parameters_[i]);
}

Result<CheckpointState> HostModelState::LoadCheckpoint(const std::string& path,
                                                       const std::string& job_identity) {
  Result<CheckpointState> state =
      LoadTrainingCheckpointThroughHost(path, model_, optimizer(), job_identity, device_);
  if (state.ok()) AdoptModelWeights();
  return state;
}

void HostModelState::PullGradients() {
  const HostMemoryScope host;
  const torch::NoGradGuard no_grad;
  for (std::size_t i = 0; i < host_.size(); ++i) {
    const torch::Tensor& grad = device_parameters_[i].grad();
    torch::Tensor& master_grad = host_[i].mutable_grad();
    if (!grad.defined()) {
      master_grad = torch::Tensor();
    } else if (master_grad.defined()) {
      master_grad.copy_(grad);
    } else {
      master_grad = HostCopy(grad);
    }
  }
}

void HostModelState::PushWeights() {
  const torch::NoGradGuard no_grad;
  for (std::size_t i = 0; i < host_.size(); ++i) device_parameters_[i].copy_(host_[i]);
}

std::int64_t HostStateBytes(std::int64_t parameter_bytes) { return 4 * parameter_bytes; }

std::int64_t HostBudgetBytes(const MemorySpec& memory) {
  if (memory.host_budget_bytes > 0) return memory.host_budget_bytes;
  return HostAvailableBytes() + HostMemoryOfProcess().live_bytes();
}

std::optional<std::string> HostStateRefusal(std::int64_t parameter_bytes,
                                            const MemorySpec& memory) {
  const std::int64_t needed = HostStateBytes(parameter_bytes);
  const std::int64_t budget = HostBudgetBytes(memory);
  if (needed <= budget) return std::nullopt;
  return "keeping the optimizer state on the host needs " + FormatBytes(needed) +
         " of host memory (fp32 master weights, their gradients and AdamW's two moments: four "
         "times " +
         FormatBytes(parameter_bytes) + "), more than the host budget of " + FormatBytes(budget) +
         (memory.host_budget_bytes > 0 ? " (memory.host_budget)"
                                       : " (what the host has available: MemAvailable)");
}

}  // namespace trainerd
