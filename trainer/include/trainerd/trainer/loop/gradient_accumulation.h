// The math of one optimizer update, split in its two halves so tests can check each:
//   AccumulateGradients: for each microbatch, forward (under autocast for bf16/fp16), loss
//     summed over valid targets and divided by the valid-target count of the WHOLE update,
//     scaled for fp16, backward. The accumulated gradient is the gradient of the mean loss
//     over the effective batch, whatever the microbatch split (uneven last microbatch and
//     masked tokens included). A module's own loss tells its count only with its sum: its
//     sums are backpropagated undivided and the gradients divided by the update's count
//     after the last backward (the same gradient, up to rounding).
//   UnscaleClipStep: once per update: unscale and check overflow (fp16; an overflow skips
//     the step and backs the scale off), measure the global gradient norm (a non-finite one
//     in fp32/bf16 takes no step: the caller stops), clip it, optimizer step.
// In a data-parallel job (data_parallel.h) each rank accumulates its share of the effective
// batch, the loss divided by the valid-target count of the whole batch over all ranks, and
// the ranks' gradients are summed once, after the last microbatch: every rank then holds the
// gradient of the one-process job, and UnscaleClipStep's norm is the global one. Under ZeRO
// stage 2 (state_sharding.h) each gradient is summed into its owner's after every microbatch
// instead, and UnscaleClipStep's norm and overflow are taken over every rank's shard.
// REQUIRES: gradients zeroed (ZeroGradients) before AccumulateGradients, once per update.
#pragma once

#include <torch/optim/optimizer.h>

#include <functional>
#include <vector>

#include "trainerd/trainer/data/dataset.h"
#include "trainerd/trainer/models/model.h"
#include "trainerd/trainer/semantics/loss_scaler.h"
#include "trainerd/trainer/semantics/training_fault.h"
#include "trainerd/trainer/spec/job_spec.h"

namespace trainerd {

class DataParallelGroup;
class StateSharding;

struct PrecisionContext {
  Precision precision = Precision::kFp32;
  DynamicLossScaler* scaler = nullptr;  // required for fp16, ignored otherwise
};

// The model's forward and loss (TrainableModel::ForwardLoss) under the plan's precision:
// autocast to bf16 (any device) or fp16 (CUDA only; CPU fp16 plans compute in fp32 and
// exercise only the loss scaler). The cross-entropy itself is fp32 (CrossEntropyTotal).
LossTerms ForwardLossWithPrecision(TrainableModel& model, const Batch& batch, Precision precision);

// Sets every existing gradient to zeros in place, keeping its memory. LibTorch 2.x's
// zero_grad() releases gradients by default (set_to_none) and 1.13's zeroes them: the loop
// says which it wants, so the memory held between and during updates, and the ledger that
// measures it, are the same under both.
void ZeroGradients(const std::vector<torch::Tensor>& parameters);

// Called after microbatch `index`'s forward and loss, before its backward: the moment
// its saved activations peak (the memory ledger measures there).
using AfterForward = std::function<void(std::size_t index)>;

struct AccumulationHooks {
  AfterForward after_forward;
  // Called after microbatch `index`'s backward (the test-only faults act there).
  std::function<void(std::size_t index)> after_backward;
  // TEST ONLY: kLossPerMicrobatch divides each microbatch's loss by its own target count.
  TrainingFault fault = TrainingFault::kNone;
};

// Returns the mean loss over the valid targets of all microbatches (not scaled), of every rank
// when `group` is given (nullptr: a one-process job). Each microbatch's forward and backward
// run in its SampleStreamScope (sample_dropout.h). `sharding`: the plan's ZeRO stage over
// `group`, nullptr without one.
double AccumulateGradients(TrainableModel& model, const std::vector<Batch>& microbatches,
                           const PrecisionContext& precision, const AccumulationHooks& hooks = {},
                           DataParallelGroup* group = nullptr, StateSharding* sharding = nullptr);

struct StepResult {
  bool skipped = false;  // no step taken: an fp16 overflow, or MeasureWithoutStep
  // fp32/bf16: the gradient norm is NaN or inf (the loss may be finite): no step taken.
  bool nonfinite_gradient = false;
  double grad_norm = 0;  // global L2 norm of the unscaled gradient, before clipping
};

// Sees the whole update's gradient (unscaled) and its global norm before clipping.
using BeforeClip = std::function<void(double grad_norm)>;

// `parameters` are those `optimizer` steps, with the update's gradients: the model's, or their
// host copies (host_model_state.h). `grad_clip` <= 0 disables clipping (the norm is still
// measured). Clipping scales every gradient by grad_clip / (norm + 1e-6) when that is below
// 1, as clip_grad_norm_ does. `shards`: the gradients of `parameters` are this rank's shard
// of the group's (ZeRO stage 2): an overflow on any rank skips every rank's step, and the norm
// is taken over every shard.
StepResult UnscaleClipStep(const std::vector<torch::Tensor>& parameters,
                           torch::optim::Optimizer& optimizer, double grad_clip,
                           const PrecisionContext& precision, const BeforeClip& before_clip = {},
                           DataParallelGroup* shards = nullptr);

// What UnscaleClipStep measures of an update whose step is skipped without an overflow (the
// parity check's replay of another side's skip): the gradient norm, seen by `before_clip` when
// finite, and no step. For a model without a loss scaler: the gradients are not unscaled.
StepResult MeasureWithoutStep(const std::vector<torch::Tensor>& parameters,
                              const BeforeClip& before_clip, DataParallelGroup* shards = nullptr);

// The global L2 norm of the gradients of `parameters` (those that have one), over every
// rank's when they are its shard of `shards`.
double GlobalGradNorm(const std::vector<torch::Tensor>& parameters,
                      DataParallelGroup* shards = nullptr);

}  // namespace trainerd
