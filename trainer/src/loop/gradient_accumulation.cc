#include "trainerd/trainer/loop/gradient_accumulation.h"

#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <optional>

#include "trainerd/trainer/device/torch_compat.h"
#include "trainerd/trainer/distributed/data_parallel.h"
#include "trainerd/trainer/distributed/state_sharding.h"
#include "trainerd/trainer/semantics/sample_dropout.h"

namespace trainerd {
namespace {

// Autocast for the forward pass: bf16 anywhere, fp16 only where the device has fp16
// autocast (CUDA); fp16 on CPU runs in fp32 and still exercises the loss scaler.
std::optional<compat::AutocastState> AutocastFor(Precision precision, at::DeviceType device) {
  if (precision == Precision::kBf16) return compat::AutocastState{true, at::kBFloat16};
  if (precision == Precision::kFp16 && device == at::kCUDA)
    return compat::AutocastState{true, at::kHalf};
  return std::nullopt;
}

}  // namespace

void ZeroGradients(const std::vector<torch::Tensor>& parameters) {
  for (torch::Tensor parameter : parameters) {
    torch::Tensor& grad = parameter.mutable_grad();
    if (!grad.defined()) continue;
    grad.detach_();
    grad.zero_();
  }
}

LossTerms ForwardLossWithPrecision(TrainableModel& model, const Batch& batch, Precision precision) {
  const c10::DeviceType device = batch.inputs.device().type();
  const auto autocast = AutocastFor(precision, device);
  if (!autocast) return model.ForwardLoss(batch);
  compat::AutocastScope scope(device, *autocast);
  return model.ForwardLoss(batch);
}

namespace {

// The sum of `count` over the ranks of `group` (the count itself without one).
std::int64_t SumOverRanks(DataParallelGroup* group, std::int64_t count) {
  if (group == nullptr) return count;
  return static_cast<std::int64_t>(std::llround(group->Sum(static_cast<double>(count))));
}

// The loss term count of the whole update (over every rank), when the loss knows it before
// the forwards (cross_entropy, mse); nullopt for a module's own loss.
std::optional<std::int64_t> UpdateTermCount(const TrainableModel& model,
                                            const std::vector<Batch>& microbatches,
                                            DataParallelGroup* group) {
  std::int64_t total = 0;
  for (const Batch& batch : microbatches) {
    const std::optional<std::int64_t> count = CountLossTerms(model.loss(), batch.targets);
    if (!count) return std::nullopt;
    total += *count;
  }
  total = SumOverRanks(group, total);
  TORCH_CHECK(total > 0, "an update without a single valid target");
  return total;
}

// A module's loss counts its terms as it computes them: each microbatch's backward took its
// sum, and the gradients are divided by the update's count once all are in.
void DivideGradients(TrainableModel& model, std::int64_t terms) {
  TORCH_CHECK(terms > 0, "an update without a single valid target");
  torch::NoGradGuard no_grad;
  for (const torch::Tensor& p : TrainableParameters(model)) {
    if (p.grad().defined()) p.grad().div_(static_cast<double>(terms));
  }
}

}  // namespace

double AccumulateGradients(TrainableModel& model, const std::vector<Batch>& microbatches,
                           const PrecisionContext& precision, const AccumulationHooks& hooks,
                           DataParallelGroup* group, StateSharding* sharding) {
  const bool to_owners = sharding != nullptr && sharding->stage() == 2;
  const std::optional<std::int64_t> known_terms = UpdateTermCount(model, microbatches, group);
  TORCH_CHECK(precision.precision != Precision::kFp16 || precision.scaler != nullptr,
              "fp16 needs a loss scaler");
  const bool per_microbatch = hooks.fault == TrainingFault::kLossPerMicrobatch;
  double loss_sum = 0;
  std::int64_t terms_seen = 0;
  for (std::size_t index = 0; index < microbatches.size(); ++index) {
    const Batch& batch = microbatches[index];
    // Open through the backward: a checkpointed block's recompute draws the same masks.
    const SampleStreamScope stream(batch.stream);
    const LossTerms terms = ForwardLossWithPrecision(model, batch, precision.precision);
    const std::int64_t divisor = per_microbatch ? terms.count : known_terms.value_or(1);
    torch::Tensor loss = terms.sum / static_cast<double>(divisor);
    if (precision.precision == Precision::kFp16) loss = precision.scaler->Scale(loss);
    if (hooks.after_forward) hooks.after_forward(index);
    loss.backward();
    if (to_owners) sharding->SumGradientsToOwners();
    if (hooks.after_backward) hooks.after_backward(index);
    loss_sum += terms.sum.item<double>();
    terms_seen += terms.count;
  }
  if (to_owners) sharding->SumRemainingMicrobatches(microbatches.size());
  if (group != nullptr) {
    // Once per update, after the last backward: no communication for the other microbatches
    // (stage 2 summed each one's into the owners').
    if (!to_owners) group->SumGradients(TrainableParameters(model));
    loss_sum = group->Sum(loss_sum);
    // A known count is already the whole batch's: no second reduction for it.
    terms_seen = known_terms ? *known_terms : SumOverRanks(group, terms_seen);
  }
  if (!known_terms && !per_microbatch) DivideGradients(model, terms_seen);
  return loss_sum / static_cast<double>(terms_seen);
}

double GlobalGradNorm(const std::vector<torch::Tensor>& parameters, DataParallelGroup* shards) {
  std::vector<torch::Tensor> norms;
  for (const torch::Tensor& p : parameters) {
    if (p.grad().defined()) norms.push_back(p.grad().detach().to(torch::kDouble).norm());
  }
  const double norm = norms.empty() ? 0.0 : torch::stack(norms).norm().item<double>();
  return shards == nullptr ? norm : std::sqrt(shards->Sum(norm * norm));
}

namespace {

// The unscaled gradient's global norm, marked when it is not finite, and shown to
// `before_clip` when it is.
StepResult MeasureGradient(const std::vector<torch::Tensor>& parameters,
                           const BeforeClip& before_clip, DataParallelGroup* shards) {
  StepResult result;
  result.grad_norm = GlobalGradNorm(parameters, shards);
  result.nonfinite_gradient = !std::isfinite(result.grad_norm);
  if (before_clip && !result.nonfinite_gradient) before_clip(result.grad_norm);
  return result;
}

}  // namespace

StepResult MeasureWithoutStep(const std::vector<torch::Tensor>& parameters,
                              const BeforeClip& before_clip, DataParallelGroup* shards) {
  StepResult result = MeasureGradient(parameters, before_clip, shards);
  result.skipped = true;
  return result;
}

StepResult UnscaleClipStep(const std::vector<torch::Tensor>& parameters,
                           torch::optim::Optimizer& optimizer, double grad_clip,
                           const PrecisionContext& precision, const BeforeClip& before_clip,
                           DataParallelGroup* shards) {
  if (precision.precision == Precision::kFp16) {
    bool overflow = precision.scaler->UnscaleAndCheckOverflow(parameters);
    if (shards != nullptr) overflow = shards->Any(overflow);
    precision.scaler->Update(overflow);
    if (overflow) {
      StepResult skipped;
      skipped.skipped = true;
      skipped.grad_norm = std::numeric_limits<double>::infinity();
      return skipped;
    }
  }
  // clip_grad_norm_ would multiply every gradient by NaN here: measure first, then decide.
  const StepResult result = MeasureGradient(parameters, before_clip, shards);
  if (result.nonfinite_gradient) return result;
  const double coefficient = grad_clip / (result.grad_norm + 1e-6);
  if (grad_clip > 0 && coefficient < 1) {
    torch::NoGradGuard no_grad;
    for (const torch::Tensor& p : parameters) {
      if (p.grad().defined()) p.grad().mul_(coefficient);
    }
  }
  optimizer.step();
  return result;
}

}  // namespace trainerd
