#include "trainerd/trainer/loop/host_model_state.h"

#include <torch/optim/adamw.h>

#include "trainerd/common/proc_file.h"
#include "trainerd/trainer/device/device_memory.h"

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

void HostModelState::MoveStateToHost(torch::optim::Optimizer& optimizer) {
  for (auto& entry : optimizer.state()) {
    auto& state = static_cast<torch::optim::AdamWParamState&>(*entry.second);
    state.exp_avg(HostCopy(state.exp_avg()));
    state.exp_avg_sq(HostCopy(state.exp_avg_sq()));
    if (state.max_exp_avg_sq().defined()) state.max_exp_avg_sq(HostCopy(state.max_exp_avg_sq()));
  }
}

std::int64_t HostStateBytes(std::int64_t parameter_bytes) { return 4 * parameter_bytes; }

std::int64_t HostBudgetBytes(const MemorySpec& memory) {
  return memory.host_budget_bytes > 0 ? memory.host_budget_bytes : HostAvailableBytes();
}

}  // namespace trainerd
