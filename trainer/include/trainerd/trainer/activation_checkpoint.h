// Activation checkpointing for LibTorch 1.13, which has no C++ API for it. The forward runs
// the block without recording its intermediates and keeps only the block's input; backward
// recomputes the block and differentiates the recomputation.
//
// - The block's parameters are inputs of the autograd node, so they receive gradients even
//   when the block input does not require grad (the reentrant-checkpoint pitfall).
// - The RNG state (the CPU generator, and the CUDA generator of the input's device when the
//   block runs on CUDA) is captured before the forward and restored for the recompute (then
//   put back), so dropout masks match and the RNG sequence equals an uncheckpointed run.
// - The autocast state (enabled, dtype) during the recompute equals the forward's.
#pragma once

#include <torch/types.h>

#include <functional>
#include <vector>

namespace trainerd {

using BlockFunction = std::function<torch::Tensor(const torch::Tensor&)>;

// `block` must stay valid until backward (it is copied into the graph). `parameters` are the
// tensors `block` reads that need gradients (the block module's parameters()).
torch::Tensor CheckpointedForward(const BlockFunction& block, const torch::Tensor& input,
                                  const std::vector<torch::Tensor>& parameters);

}  // namespace trainerd
