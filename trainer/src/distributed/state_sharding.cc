#include "trainerd/trainer/distributed/state_sharding.h"

#include <algorithm>

#include "trainerd/trainer/device/device_memory.h"
#include "trainerd/trainer/device/torch_compat.h"
#include "trainerd/trainer/device/weight_decay.h"

namespace trainerd {
namespace {

// `parameter`'s AdamW state in `optimizer`, or nullptr before its first step.
const torch::optim::AdamWParamState* StateOf(torch::optim::AdamW& optimizer,
                                             const torch::Tensor& parameter) {
  const auto it = optimizer.state().find(compat::OptimizerStateKey(parameter));
  if (it == optimizer.state().end()) return nullptr;
  return &static_cast<const torch::optim::AdamWParamState&>(*it->second);
}

}  // namespace

std::vector<int> ShardOwners(const std::vector<std::int64_t>& numels, int ranks) {
  std::int64_t total = 0;
  for (std::int64_t n : numels) total += n;
  std::vector<int> owners;
  owners.reserve(numels.size());
  std::int64_t before = 0;
  for (std::int64_t n : numels) {
    const double middle = static_cast<double>(before) + static_cast<double>(n) / 2;
    const auto rank =
        static_cast<int>(middle * ranks / static_cast<double>(std::max<std::int64_t>(total, 1)));
    owners.push_back(std::clamp(rank, 0, ranks - 1));
    before += n;
  }
  return owners;
}

std::int64_t BytesOutsideLargestShard(const std::vector<torch::Tensor>& parameters, int ranks) {
  std::vector<std::int64_t> numels;
  for (const torch::Tensor& p : parameters) numels.push_back(p.numel());
  const std::vector<int> owners = ShardOwners(numels, std::max(ranks, 1));
  std::vector<std::int64_t> per_rank(static_cast<std::size_t>(std::max(ranks, 1)), 0);
  std::int64_t total = 0;
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    if (!parameters[i].requires_grad()) continue;
    const auto bytes = static_cast<std::int64_t>(parameters[i].nbytes());
    per_rank[static_cast<std::size_t>(owners[i])] += bytes;
    total += bytes;
  }
  return total - *std::max_element(per_rank.begin(), per_rank.end());
}

StateSharding::StateSharding(std::vector<torch::Tensor> parameters, int stage, int microbatches,
                             DataParallelGroup* group)
    : parameters_(std::move(parameters)),
      stage_(stage),
      microbatches_(static_cast<std::size_t>(microbatches)),
      group_(group) {
  std::vector<std::int64_t> numels;
  numels.reserve(parameters_.size());
  for (const torch::Tensor& p : parameters_) numels.push_back(p.numel());
  owners_ = ShardOwners(numels, group_->world_size());
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    if (owners_[i] == group_->rank()) owned_.push_back(parameters_[i]);
  }
}

void StateSharding::SumGradientsToOwners() {
  std::vector<bool> held(parameters_.size());
  for (std::size_t i = 0; i < parameters_.size(); ++i) held[i] = parameters_[i].grad().defined();
  group_->SumGradientsToOwners(parameters_, owners_, group_->AnyOf(held));
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    if (owners_[i] != group_->rank()) parameters_[i].mutable_grad() = torch::Tensor();
  }
}

void StateSharding::SumRemainingMicrobatches(std::size_t done) {
  for (std::size_t index = done; index < microbatches_; ++index) SumGradientsToOwners();
}

void StateSharding::BroadcastWeights() {
  std::vector<torch::Tensor> data;
  data.reserve(parameters_.size());
  for (const torch::Tensor& p : parameters_) data.push_back(p.detach());
  group_->BroadcastFromOwners(data, owners_);
}

std::unique_ptr<torch::optim::AdamW> StateSharding::FullOptimizer(
    torch::optim::AdamW& shard) const {
  // The shard's first group has the job's options (WeightDecayGroups).
  const auto& options =
      static_cast<const torch::optim::AdamWOptions&>(shard.param_groups().front().options());
  return std::make_unique<torch::optim::AdamW>(WeightDecayGroups(parameters_, options), options);
}

std::unique_ptr<torch::optim::AdamW> StateSharding::GatherOptimizerState(
    torch::optim::AdamW& shard) const {
  std::unique_ptr<torch::optim::AdamW> full = FullOptimizer(shard);
  const HostMemoryScope host;
  const torch::NoGradGuard no_grad;
  // Each parameter's step count from its owner: -1 where it has no state yet.
  std::vector<torch::Tensor> steps;
  for (const torch::Tensor& p : parameters_) {
    const torch::optim::AdamWParamState* state = StateOf(shard, p);
    steps.push_back(
        torch::full({1}, state ? static_cast<double>(state->step()) : -1.0, torch::kDouble));
  }
  group_->BroadcastFromOwners(steps, owners_);
  // Then the two moments of every parameter that has them, into host copies.
  std::vector<torch::Tensor> moments;
  std::vector<int> roots;
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    const auto step = static_cast<std::int64_t>(steps[i].item<double>());
    if (step < 0) continue;
    auto state = std::make_unique<torch::optim::AdamWParamState>();
    state->step(step);
    const torch::optim::AdamWParamState* mine = StateOf(shard, parameters_[i]);  // owner's
    for (const bool square : {false, true}) {
      torch::Tensor moment =
          mine != nullptr
              ? (square ? mine->exp_avg_sq() : mine->exp_avg())
                    .to(torch::kCPU, /*non_blocking=*/false, /*copy=*/true)
              : torch::empty(parameters_[i].sizes(),
                             torch::TensorOptions().dtype(parameters_[i].scalar_type()));
      moments.push_back(moment);
      roots.push_back(owners_[i]);
      square ? state->exp_avg_sq(moment) : state->exp_avg(moment);
    }
    full->state()[compat::OptimizerStateKey(parameters_[i])] = std::move(state);
  }
  group_->BroadcastFromOwners(moments, roots);
  return full;
}

void StateSharding::TakeOptimizerState(torch::optim::AdamW& full, torch::optim::AdamW& shard,
                                       const torch::Device& device) const {
  for (const torch::Tensor& p : owned_) {
    auto it = full.state().find(compat::OptimizerStateKey(p));
    if (it == full.state().end()) continue;
    auto& state = static_cast<torch::optim::AdamWParamState&>(*it->second);
    state.exp_avg(state.exp_avg().to(device, /*non_blocking=*/false, /*copy=*/true));
    state.exp_avg_sq(state.exp_avg_sq().to(device, /*non_blocking=*/false, /*copy=*/true));
    shard.state()[compat::OptimizerStateKey(p)] = std::move(it->second);
  }
  full.state().clear();
}

}  // namespace trainerd
