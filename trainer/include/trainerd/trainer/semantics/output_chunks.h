// A next-token model's output layer and its cross-entropy over a few positions at a time
// (plan output_chunk): the [positions, vocab] logits of a microbatch are never held at once,
// in training or in evaluation. In training the chunks are one autograd node: its forward
// keeps only the hidden states and the layer's parameters, no chunk's logits; its backward
// recomputes one chunk's logits at a time (under the forward's autocast) and sums the layer's
// parameter gradients into one tensor each, in place, so that autograd receives one gradient
// per parameter rather than one per chunk. The sum over chunks equals the whole
// cross-entropy sum up to fp32 rounding (the order of additions), and so do the gradients:
// the hidden states' are the same per position, the layer's summed over the chunks.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "trainerd/trainer/semantics/loss.h"

namespace trainerd {

// Sees the logits of some positions and their targets, as the evaluation's prediction tallies
// do: the whole microbatch's or one chunk's.
using OutputsObserver =
    std::function<void(const torch::Tensor& logits, const torch::Tensor& targets)>;

struct ChunkedOutput {
  // The output layer on any [..., hidden] states: [..., vocab] logits.
  std::function<torch::Tensor(const torch::Tensor&)> layer;
  std::vector<torch::Tensor> parameters;  // the layer's: they receive its gradients
  std::int64_t chunk = 0;                 // positions per chunk, > 0
  std::int64_t ignore_index = -100;       // model.ignore_index
  // TEST ONLY (TrainingFault::kChunkDropsAToken): every chunk after the first leaves its first
  // position's loss out while the count still has it, the classic off-by-one at a boundary.
  bool drop_boundary_token = false;
};

// The cross-entropy of `output.layer(hidden)` against `targets` (hidden [..., hidden_size],
// targets of hidden's leading shape), summed, with its count, as CrossEntropySum gives it.
// `observe`, when set, sees every chunk's logits. REQUIRES: no `observe` where gradients are
// recorded (the backward recomputes every chunk's logits: it would see them twice).
LossTerms ChunkedCrossEntropy(const ChunkedOutput& output, const torch::Tensor& hidden,
                              const torch::Tensor& targets, const OutputsObserver& observe = {});

}  // namespace trainerd
