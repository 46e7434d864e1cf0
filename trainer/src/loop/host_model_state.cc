#include "trainerd/trainer/loop/host_model_state.h"

#include "trainerd/common/proc_file.h"
#include "trainerd/trainer/device/device_memory.h"
#include "trainerd/trainer/spec/units.h"

namespace trainerd {
namespace {

// A host copy of `t`, fp32, in host memory.
torch::Tensor HostCopy(const torch::Tensor& t) {
  const HostMemoryScope host;
  return t.detach().to(torch::kCPU, torch::kFloat, /*non_blocking=*/false, /*copy=*/true);
}

}  // namespace

HostModelState::HostModelState(
    const torch::OrderedDict<std::string, torch::Tensor>& device_parameters) {
  for (const auto& item : device_parameters) {
    device_.push_back(item.value());
    host_.push_back(HostCopy(item.value()).requires_grad_(item.value().requires_grad()));
    named_.insert(item.key(), host_.back());
  }
}

void HostModelState::PullGradients() {
  const HostMemoryScope host;
  const torch::NoGradGuard no_grad;
  for (std::size_t i = 0; i < host_.size(); ++i) {
    const torch::Tensor& grad = device_[i].grad();
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
  for (std::size_t i = 0; i < host_.size(); ++i) device_[i].copy_(host_[i]);
}

void HostModelState::PullWeights() {
  const torch::NoGradGuard no_grad;
  for (std::size_t i = 0; i < host_.size(); ++i) host_[i].copy_(device_[i]);
}

void HostModelState::MoveToDevice(torch::nn::Module& model, const torch::Device& device) {
  const torch::NoGradGuard no_grad;
  for (torch::Tensor& p : model.parameters()) {
    p.set_data(p.detach().to(device, /*non_blocking=*/false, /*copy=*/true));
  }
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
