#include "trainerd/trainer/gradient_accumulation.h"

#include <torch/torch.h>

#include <limits>
#include <optional>

#include "trainerd/trainer/torch_compat.h"

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

void ZeroGradients(torch::optim::Optimizer& optimizer) {
  for (auto& group : optimizer.param_groups()) {
    for (auto& parameter : group.params()) {
      torch::Tensor& grad = parameter.mutable_grad();
      if (!grad.defined()) continue;
      grad.detach_();
      grad.zero_();
    }
  }
}

torch::Tensor ForwardWithPrecision(TrainableModel& model, const torch::Tensor& inputs,
                                   Precision precision) {
  const auto autocast = AutocastFor(precision, inputs.device().type());
  if (!autocast) return model.forward(inputs);
  compat::AutocastScope scope(inputs.device().type(), *autocast);
  return model.forward(inputs);
}

double AccumulateGradients(TrainableModel& model, const std::vector<Batch>& microbatches,
                           const PrecisionContext& precision, const AfterForward& after_forward) {
  std::int64_t valid_targets = 0;
  for (const Batch& batch : microbatches)
    valid_targets += batch.targets.ne(-1).sum().item<std::int64_t>();
  TORCH_CHECK(valid_targets > 0, "an update without a single valid target");
  TORCH_CHECK(precision.precision != Precision::kFp16 || precision.scaler != nullptr,
              "fp16 needs a loss scaler");
  double loss_sum = 0;
  for (std::size_t index = 0; index < microbatches.size(); ++index) {
    const Batch& batch = microbatches[index];
    const LossTerms terms = CrossEntropySum(
        ForwardWithPrecision(model, batch.inputs, precision.precision), batch.targets);
    torch::Tensor loss = terms.sum / static_cast<double>(valid_targets);
    if (precision.precision == Precision::kFp16) loss = precision.scaler->Scale(loss);
    if (after_forward) after_forward(index);
    loss.backward();
    loss_sum += terms.sum.item<double>();
  }
  return loss_sum / static_cast<double>(valid_targets);
}

StepResult UnscaleClipStep(TrainableModel& model, torch::optim::Optimizer& optimizer,
                           double grad_clip, const PrecisionContext& precision) {
  StepResult result;
  const std::vector<torch::Tensor> parameters = model.parameters();
  if (precision.precision == Precision::kFp16) {
    const bool overflow = precision.scaler->UnscaleAndCheckOverflow(parameters);
    precision.scaler->Update(overflow);
    if (overflow) {
      result.skipped = true;
      result.grad_norm = std::numeric_limits<double>::infinity();
      return result;
    }
  }
  // An infinite limit measures the norm without clipping when clipping is disabled.
  result.grad_norm = torch::nn::utils::clip_grad_norm_(
      parameters, grad_clip > 0 ? grad_clip : std::numeric_limits<double>::infinity());
  optimizer.step();
  return result;
}

}  // namespace trainerd
