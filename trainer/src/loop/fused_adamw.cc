#include "loop/fused_adamw.h"

#include <algorithm>

namespace trainerd {

#if TRAINERD_TORCH_AT_LEAST(2, 4)
torch::Tensor FusedAdamW::step(LossClosure closure) {
  // A closure (re-evaluating the loss) and amsgrad are not what the trainer uses.
  const bool amsgrad = std::any_of(param_groups().begin(), param_groups().end(), [](auto& group) {
    return static_cast<torch::optim::AdamWOptions&>(group.options()).amsgrad();
  });
  if (closure || amsgrad) return torch::optim::AdamW::step(closure);
  torch::NoGradGuard no_grad;
  for (torch::optim::OptimizerParamGroup& group : param_groups()) {
    auto& options = static_cast<torch::optim::AdamWOptions&>(group.options());
    std::vector<torch::Tensor> params, grads, averages, squares, steps;
    for (const torch::Tensor& p : group.params()) {
      if (!p.grad().defined()) continue;
      std::unique_ptr<torch::optim::OptimizerParamState>& slot = state_[p.unsafeGetTensorImpl()];
      if (!slot) {
        auto fresh = std::make_unique<torch::optim::AdamWParamState>();
        fresh->step(0);
        fresh->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        fresh->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        slot = std::move(fresh);
      }
      auto& state = static_cast<torch::optim::AdamWParamState&>(*slot);
      state.step(state.step() + 1);
      params.push_back(p);
      grads.push_back(p.grad());
      averages.push_back(state.exp_avg());
      squares.push_back(state.exp_avg_sq());
      // The kernel reads each tensor's step count from a float tensor on its device.
      steps.push_back(torch::full({}, static_cast<double>(state.step()),
                                  torch::TensorOptions().dtype(torch::kFloat).device(p.device())));
    }
    if (params.empty()) continue;
    const auto [beta1, beta2] = options.betas();
    at::_fused_adamw_(params, grads, averages, squares, /*max_exp_avg_sqs=*/{}, steps, options.lr(),
                      beta1, beta2, options.weight_decay(), options.eps(),
                      /*amsgrad=*/false, /*maximize=*/false);
  }
  return {};
}
#endif

}  // namespace trainerd
