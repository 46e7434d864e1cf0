#include "trainerd/trainer/semantics/activation_checkpoint.h"

#include <torch/torch.h>

#include "trainerd/trainer/device/torch_compat.h"
#include "trainerd/trainer/semantics/sample_dropout.h"

namespace trainerd {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// What the recompute needs besides the saved input, carried through the graph.
struct RecomputeRecipe : torch::CustomClassHolder {
  BlockFunction block;
  compat::RngState rng_state;  // CPU, and the input's CUDA device where it is one
  at::DeviceType device = at::kCPU;
  compat::AutocastState autocast;
  bool input_requires_grad = false;
  std::vector<torch::Tensor> buffers;  // updated by the forward: restored after the recompute
  // The forward's sample stream. Not read at backward time: LibTorch runs a CUDA graph's
  // backward on its device's own thread, where the forward thread's stream is not current.
  std::optional<SampleStream> stream;
  bool fresh_recompute = false;  // TEST ONLY
};

class CheckpointFunction : public torch::autograd::Function<CheckpointFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& input,
                               torch::TensorList parameters, const BlockFunction& block,
                               const std::vector<torch::Tensor>& buffers, bool fresh_recompute) {
    auto recipe = c10::make_intrusive<RecomputeRecipe>();
    recipe->block = block;
    recipe->buffers = buffers;
    recipe->fresh_recompute = fresh_recompute;
    recipe->stream = SampleStreamScope::Current();
    recipe->rng_state = compat::CaptureRng(input.device());
    recipe->device = input.device().type();
    recipe->autocast = compat::GetAutocast(recipe->device);
    recipe->input_requires_grad = input.requires_grad();
    ctx->saved_data["recipe"] = c10::IValue::make_capsule(recipe);
    // Parameters are leaves that live anyway: saving them costs no memory.
    variable_list saved = {input};
    saved.insert(saved.end(), parameters.begin(), parameters.end());
    ctx->save_for_backward(saved);
    torch::NoGradGuard no_grad;
    return block(input);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    auto recipe =
        c10::static_intrusive_pointer_cast<RecomputeRecipe>(ctx->saved_data["recipe"].toCapsule());
    const variable_list saved = ctx->get_saved_variables();
    const torch::Tensor input = saved[0].detach().requires_grad_(recipe->input_requires_grad);

    torch::Tensor output;
    const compat::RngState rng_now = compat::CaptureRng(input.device());
    if (!recipe->fresh_recompute) compat::RestoreRng(recipe->rng_state);
    std::vector<torch::Tensor> buffers_now;
    for (const torch::Tensor& b : recipe->buffers) buffers_now.push_back(b.clone());
    {
      const SampleStreamScope stream(recipe->fresh_recompute ? std::nullopt : recipe->stream);
      compat::AutocastScope autocast(recipe->device, recipe->autocast);
      torch::AutoGradMode enable_grad(true);
      output = recipe->block(input);
    }
    compat::RestoreRng(rng_now);

    // One gradient per forward input: input, each parameter, then the block, the buffers and
    // the flag (not differentiable).
    variable_list inputs = saved;
    inputs[0] = input;
    variable_list result = GradientsOfRecompute(output, inputs, grad_outputs.at(0));
    result.resize(saved.size() + 3);
    // Only now: BatchNorm's backward reads the running statistics it saved.
    torch::NoGradGuard no_grad;
    for (std::size_t i = 0; i < buffers_now.size(); ++i) recipe->buffers[i].copy_(buffers_now[i]);
    return result;
  }
};

}  // namespace

std::vector<torch::Tensor> GradientsOfRecompute(const torch::Tensor& output,
                                                const std::vector<torch::Tensor>& inputs,
                                                const torch::Tensor& grad_output) {
  std::vector<torch::Tensor> wrt;
  std::vector<std::size_t> slot;  // position of each `wrt` entry in `inputs`
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].requires_grad()) {
      wrt.push_back(inputs[i]);
      slot.push_back(i);
    }
  }
  std::vector<torch::Tensor> gradients(inputs.size());
  if (wrt.empty()) return gradients;
  const variable_list grads = torch::autograd::grad({output}, wrt, {grad_output},
                                                    /*retain_graph=*/false,
                                                    /*create_graph=*/false,
                                                    /*allow_unused=*/true);
  for (std::size_t k = 0; k < grads.size(); ++k) gradients[slot[k]] = grads[k];
  return gradients;
}

torch::Tensor CheckpointedForward(const BlockFunction& block, const torch::Tensor& input,
                                  const std::vector<torch::Tensor>& parameters,
                                  const std::vector<torch::Tensor>& buffers, bool fresh_recompute) {
  return CheckpointFunction::apply(input, torch::TensorList(parameters), block, buffers,
                                   fresh_recompute);
}

}  // namespace trainerd
