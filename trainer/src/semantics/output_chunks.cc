#include "trainerd/trainer/semantics/output_chunks.h"

#include <torch/torch.h>

#include <algorithm>

#include "trainerd/trainer/device/torch_compat.h"
#include "trainerd/trainer/semantics/activation_checkpoint.h"

namespace trainerd {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The cross-entropy sum of one chunk's logits, taken outside autocast as the unchunked loss
// is (ForwardLoss); `observe` sees the logits.
torch::Tensor ChunkLoss(const ChunkedOutput& output, const torch::Tensor& states,
                        const torch::Tensor& targets, const OutputsObserver& observe) {
  const torch::Tensor logits = output.layer(states);
  if (observe) {
    const torch::NoGradGuard no_grad;
    observe(logits, targets);
  }
  const compat::AutocastScope off(logits.device().type(), compat::AutocastState{});
  return CrossEntropyTotal(logits, targets, output.ignore_index);
}

// What the backward needs besides the saved hidden states and parameters.
struct ChunkRecipe : torch::CustomClassHolder {
  ChunkedOutput output;
  torch::Tensor targets;  // flat, one per position
  at::DeviceType device = at::kCPU;
  compat::AutocastState autocast;  // the forward's, for the recomputed logits
};

// The sum over chunks as one autograd node: the forward keeps no chunk's logits; the backward
// recomputes them a chunk at a time and sums the layer's parameter gradients into one tensor
// each, in place, so that autograd receives one gradient per parameter, not one per chunk.
class ChunkedLossFunction : public torch::autograd::Function<ChunkedLossFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& states,
                               torch::TensorList parameters, const ChunkedOutput& output,
                               const torch::Tensor& targets) {
    auto recipe = c10::make_intrusive<ChunkRecipe>();
    recipe->output = output;
    recipe->targets = targets;
    recipe->device = states.device().type();
    recipe->autocast = compat::GetAutocast(recipe->device);
    ctx->saved_data["recipe"] = c10::IValue::make_capsule(recipe);
    variable_list saved = {states};
    saved.insert(saved.end(), parameters.begin(), parameters.end());
    ctx->save_for_backward(saved);
    const torch::NoGradGuard no_grad;
    torch::Tensor sum = torch::zeros({}, states.options().dtype(torch::kFloat));
    for (std::int64_t start = 0; start < states.size(0); start += output.chunk) {
      const std::int64_t size = std::min(output.chunk, states.size(0) - start);
      sum += ChunkLoss(output, states.narrow(0, start, size), targets.narrow(0, start, size), {});
    }
    return sum;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    auto recipe =
        c10::static_intrusive_pointer_cast<ChunkRecipe>(ctx->saved_data["recipe"].toCapsule());
    const variable_list saved = ctx->get_saved_variables();
    const torch::Tensor& states = saved[0];
    const std::int64_t chunk = recipe->output.chunk;
    // One gradient per forward input: the states, each parameter, the output, the targets.
    variable_list result(saved.size() + 2);
    if (states.requires_grad()) result[0] = torch::zeros_like(states);
    const compat::AutocastScope autocast(recipe->device, recipe->autocast);
    const torch::AutoGradMode enable_grad(true);
    for (std::int64_t start = 0; start < states.size(0); start += chunk) {
      const std::int64_t size = std::min(chunk, states.size(0) - start);
      const torch::Tensor part =
          states.narrow(0, start, size).detach().requires_grad_(states.requires_grad());
      const torch::Tensor loss =
          ChunkLoss(recipe->output, part, recipe->targets.narrow(0, start, size), {});
      variable_list inputs = saved;
      inputs[0] = part;
      const variable_list grads = GradientsOfRecompute(loss, inputs, grad_outputs.at(0));
      const torch::NoGradGuard no_grad;
      for (std::size_t i = 0; i < grads.size(); ++i) {
        if (!grads[i].defined()) continue;
        torch::Tensor& into = result[i];
        if (i == 0) {
          into.narrow(0, start, size).copy_(grads[i]);
        } else if (into.defined()) {
          into.add_(grads[i]);
        } else {
          into = grads[i];
        }
      }
    }
    return result;
  }
};

}  // namespace

LossTerms ChunkedCrossEntropy(const ChunkedOutput& output, const torch::Tensor& hidden,
                              const torch::Tensor& targets, const OutputsObserver& observe) {
  TORCH_CHECK(output.chunk > 0, "an output chunk of ", output.chunk, " positions");
  const torch::Tensor states = hidden.reshape({-1, hidden.size(-1)});
  torch::Tensor flat = targets.reshape({-1});
  TORCH_CHECK(states.size(0) == flat.size(0), "hidden states of ", states.size(0),
              " positions against ", flat.size(0), " targets");
  const bool recorded = torch::GradMode::is_enabled();
  TORCH_CHECK(!(recorded && observe), "outputs are observed where no gradient is recorded");
  LossTerms terms;
  terms.count = flat.ne(output.ignore_index).sum().item<std::int64_t>();
  if (output.drop_boundary_token) {
    flat = flat.clone();
    for (std::int64_t start = output.chunk; start < flat.size(0); start += output.chunk) {
      flat.index_put_({start}, output.ignore_index);
    }
  }
  if (recorded) {
    terms.sum =
        ChunkedLossFunction::apply(states, torch::TensorList(output.parameters), output, flat);
    return terms;
  }
  terms.sum = torch::zeros({}, states.options().dtype(torch::kFloat));
  for (std::int64_t start = 0; start < flat.size(0); start += output.chunk) {
    const std::int64_t size = std::min(output.chunk, flat.size(0) - start);
    terms.sum +=
        ChunkLoss(output, states.narrow(0, start, size), flat.narrow(0, start, size), observe);
  }
  return terms;
}

}  // namespace trainerd
