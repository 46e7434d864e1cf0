// Which parameters AdamW's weight decay shrinks: the matrices (the weights of linear layers,
// embeddings and convolutions), never a bias or a normalization layer's weight. That is what
// the `transformers` Trainer decays (Trainer.get_decay_parameter_names: no LayerNorm, no name
// with "bias", "norm", "layernorm" or "rmsnorm"), for every architecture trainerd builds
// (tested against it: HfWeightDecayTest), and what nanoGPT and torchtune's recipes decay (a
// parameter of two or more dimensions). Decaying a normalization weight pulls it toward 0
// every update, away from the 1 it was trained at. In device/, below every layer that builds
// an AdamW (distributed's full optimizer of a sharded checkpoint, loop's model states).
#pragma once

#include <torch/torch.h>

#include <vector>

namespace trainerd {

// Whether weight decay shrinks `parameter`: a tensor of two or more dimensions.
bool DecaysWeight(const torch::Tensor& parameter);

// `parameters` as AdamW's two parameter groups, in their order within each: those that
// DecaysWeight with `options` as given, then the others with `options` but no weight decay.
// Both groups are always there (either may be empty), so that every form of the model state
// and the full optimizer of a checkpoint have the same groups, whoever wrote it.
std::vector<torch::optim::OptimizerParamGroup> WeightDecayGroups(
    const std::vector<torch::Tensor>& parameters, const torch::optim::AdamWOptions& options);

}  // namespace trainerd
