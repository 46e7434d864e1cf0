// The math of one optimizer update, split in its two halves so tests can check each:
//   AccumulateGradients: for each microbatch, forward (under autocast for bf16/fp16), loss
//     summed over valid targets and divided by the valid-target count of the WHOLE update,
//     scaled for fp16, backward. The accumulated gradient is the gradient of the mean loss
//     over the effective batch, whatever the microbatch split (uneven last microbatch and
//     masked tokens included).
//   UnscaleClipStep: once per update: unscale and check overflow (fp16; an overflow skips
//     the step and backs the scale off), clip the global gradient norm, optimizer step.
// REQUIRES: gradients zeroed (ZeroGradients) before AccumulateGradients, once per update.
#pragma once

#include <torch/optim/optimizer.h>

#include <functional>
#include <vector>

#include "trainerd/trainer/job_spec.h"
#include "trainerd/trainer/loss_scaler.h"
#include "trainerd/trainer/model.h"
#include "trainerd/trainer/text_corpus.h"

namespace trainerd {

struct PrecisionContext {
  Precision precision = Precision::kFp32;
  DynamicLossScaler* scaler = nullptr;  // required for fp16, ignored otherwise
};

// The model's forward under the plan's precision: autocast to bf16 (any device) or fp16
// (CUDA only; CPU fp16 plans compute in fp32 and exercise only the loss scaler).
torch::Tensor ForwardWithPrecision(TrainableModel& model, const torch::Tensor& inputs,
                                   Precision precision);

// Sets every existing gradient to zeros in place, keeping its memory. LibTorch 2.x's
// zero_grad() releases gradients by default (set_to_none) and 1.13's zeroes them: the loop
// says which it wants, so the memory held between and during updates, and the ledger that
// measures it, are the same under both.
void ZeroGradients(torch::optim::Optimizer& optimizer);

// Called after microbatch `index`'s forward and loss, before its backward: the moment
// its saved activations peak (the memory ledger measures there).
using AfterForward = std::function<void(std::size_t index)>;

// Returns the mean loss over the valid targets of all microbatches (not scaled).
double AccumulateGradients(TrainableModel& model, const std::vector<Batch>& microbatches,
                           const PrecisionContext& precision,
                           const AfterForward& after_forward = {});

struct StepResult {
  bool skipped = false;  // fp16 overflow: no step taken
  double grad_norm = 0;  // global L2 norm of the unscaled gradient, before clipping
};

// `grad_clip` <= 0 disables clipping (the norm is still measured).
StepResult UnscaleClipStep(TrainableModel& model, torch::optim::Optimizer& optimizer,
                           double grad_clip, const PrecisionContext& precision);

}  // namespace trainerd
