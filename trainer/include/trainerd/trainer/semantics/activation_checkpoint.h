// Activation checkpointing for LibTorch 1.13, which has no C++ API for it. The forward runs
// the block without recording its intermediates and keeps only the block's input; backward
// recomputes the block and differentiates the recomputation.
//
// - The block's parameters are inputs of the autograd node, so they receive gradients even
//   when the block input does not require grad (the reentrant-checkpoint pitfall).
// - The RNG state (the CPU generator, and the CUDA generator of the input's device when the
//   block runs on CUDA) is captured before the forward and restored for the recompute (then
//   put back), so dropout masks match and the RNG sequence equals an uncheckpointed run.
// - Dropout the trainer owns (sample_dropout.h) draws the same masks in the recompute because
//   the microbatch's SampleStreamScope is still open during its backward.
// - The autocast state (enabled, dtype) during the recompute equals the forward's.
// - The block's buffers (BatchNorm running statistics) are put back after the recompute,
//   which would otherwise update them a second time per forward.
#pragma once

#include <torch/types.h>

#include <functional>
#include <vector>

namespace trainerd {

using BlockFunction = std::function<torch::Tensor(const torch::Tensor&)>;

// `block` must stay valid until backward (it is copied into the graph). `parameters` are the
// tensors `block` reads that need gradients (the block module's parameters()), `buffers` the
// state its forward updates (the module's buffers()). `fresh_recompute` (TEST ONLY,
// TrainingFault::kRecomputeFreshRng) recomputes with the generators as they are and without
// the sample stream: the classic bug of a recompute that draws new dropout masks.
torch::Tensor CheckpointedForward(const BlockFunction& block, const torch::Tensor& input,
                                  const std::vector<torch::Tensor>& parameters,
                                  const std::vector<torch::Tensor>& buffers = {},
                                  bool fresh_recompute = false);

// The gradients of `output` (its own given as `grad_output`) with respect to each of
// `inputs`, in their order: undefined where an input requires none or does not reach it. What
// a backward that recomputes its forward returns for the tensors it saved.
std::vector<torch::Tensor> GradientsOfRecompute(const torch::Tensor& output,
                                                const std::vector<torch::Tensor>& inputs,
                                                const torch::Tensor& grad_output);

}  // namespace trainerd
