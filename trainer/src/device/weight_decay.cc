#include "trainerd/trainer/device/weight_decay.h"

#include <memory>

namespace trainerd {

bool DecaysWeight(const torch::Tensor& parameter) { return parameter.dim() >= 2; }

std::vector<torch::optim::OptimizerParamGroup> WeightDecayGroups(
    const std::vector<torch::Tensor>& parameters, const torch::optim::AdamWOptions& options) {
  std::vector<torch::Tensor> decayed, kept;
  for (const torch::Tensor& p : parameters) (DecaysWeight(p) ? decayed : kept).push_back(p);
  auto without_decay = std::make_unique<torch::optim::AdamWOptions>(options);
  without_decay->weight_decay(0);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decayed, std::make_unique<torch::optim::AdamWOptions>(options));
  groups.emplace_back(kept, std::move(without_decay));
  return groups;
}

}  // namespace trainerd
