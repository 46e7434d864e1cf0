// The job's loss (model.loss), as a sum over its terms and how many terms there were: the
// training loop divides every microbatch's sum by the term count of the WHOLE effective
// batch, so the accumulated gradient is the mean over the batch whatever the split.
//   cross_entropy  logits [..., V] against class ids [...]; targets equal to
//                  model.ignore_index (default -100, PyTorch's) carry no loss and are not
//                  counted
//   mse            squared error summed over every element; outputs and targets of one shape
//   module         the module's own `loss(outputs, targets) -> (sum, count)` (TorchScript)
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <optional>

#include "trainerd/trainer/spec/job_spec.h"

namespace trainerd {

struct LossTerms {
  torch::Tensor sum;
  std::int64_t count = 0;
};

LossTerms CrossEntropySum(const torch::Tensor& logits, const torch::Tensor& targets,
                          std::int64_t ignore_index);
// Its sum alone, in fp32 whatever the logits' precision.
torch::Tensor CrossEntropyTotal(const torch::Tensor& logits, const torch::Tensor& targets,
                                std::int64_t ignore_index);
LossTerms SquaredErrorSum(const torch::Tensor& outputs, const torch::Tensor& targets);

// cross_entropy or mse. REQUIRES: spec.kind != LossKind::kModule.
LossTerms BuiltInLoss(const LossSpec& spec, const torch::Tensor& outputs,
                      const torch::Tensor& targets);

// The count BuiltInLoss will give for `targets`, known before any forward; nullopt for a
// module's own loss (its count is known only from its result).
std::optional<std::int64_t> CountLossTerms(const LossSpec& spec, const torch::Tensor& targets);

}  // namespace trainerd
