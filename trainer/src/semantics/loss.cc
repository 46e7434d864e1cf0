#include "trainerd/trainer/semantics/loss.h"

#include <torch/torch.h>

namespace trainerd {

torch::Tensor CrossEntropyTotal(const torch::Tensor& logits, const torch::Tensor& targets,
                                std::int64_t ignore_index) {
  return torch::nn::functional::cross_entropy(
      logits.reshape({-1, logits.size(-1)}).to(torch::kFloat), targets.reshape({-1}),
      torch::nn::functional::CrossEntropyFuncOptions()
          .ignore_index(ignore_index)
          .reduction(torch::kSum));
}

LossTerms CrossEntropySum(const torch::Tensor& logits, const torch::Tensor& targets,
                          std::int64_t ignore_index) {
  LossTerms terms;
  terms.sum = CrossEntropyTotal(logits, targets, ignore_index);
  terms.count = targets.ne(ignore_index).sum().item<std::int64_t>();
  return terms;
}

LossTerms SquaredErrorSum(const torch::Tensor& outputs, const torch::Tensor& targets) {
  TORCH_CHECK(outputs.sizes() == targets.sizes(), "mse: outputs ", outputs.sizes(), " and targets ",
              targets.sizes(), " differ in shape");
  LossTerms terms;
  terms.sum = (outputs.to(torch::kFloat) - targets.to(torch::kFloat)).square().sum();
  terms.count = targets.numel();
  return terms;
}

LossTerms BuiltInLoss(const LossSpec& spec, const torch::Tensor& outputs,
                      const torch::Tensor& targets) {
  TORCH_CHECK(spec.kind != LossKind::kModule, "a module's own loss is the module's to compute");
  return spec.kind == LossKind::kMse ? SquaredErrorSum(outputs, targets)
                                     : CrossEntropySum(outputs, targets, spec.ignore_index);
}

std::optional<std::int64_t> CountLossTerms(const LossSpec& spec, const torch::Tensor& targets) {
  switch (spec.kind) {
    case LossKind::kCrossEntropy:
      return targets.ne(spec.ignore_index).sum().item<std::int64_t>();
    case LossKind::kMse:
      return targets.numel();
    case LossKind::kModule:
      return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace trainerd
