#include "trainerd/trainer/semantics/output_chunks.h"

#include <torch/torch.h>

#include <algorithm>

#include "trainerd/trainer/device/torch_compat.h"
#include "trainerd/trainer/semantics/activation_checkpoint.h"

namespace trainerd {

LossTerms ChunkedCrossEntropy(const ChunkedOutput& output, const torch::Tensor& hidden,
                              const torch::Tensor& targets, const OutputsObserver& observe) {
  TORCH_CHECK(output.chunk > 0, "an output chunk of ", output.chunk, " positions");
  const torch::Tensor states = hidden.reshape({-1, hidden.size(-1)});
  const torch::Tensor flat = targets.reshape({-1});
  TORCH_CHECK(states.size(0) == flat.size(0), "hidden states of ", states.size(0),
              " positions against ", flat.size(0), " targets");
  const bool recorded = torch::GradMode::is_enabled();
  TORCH_CHECK(!(recorded && observe), "outputs are observed where no gradient is recorded");
  LossTerms terms;
  terms.count = flat.ne(output.ignore_index).sum().item<std::int64_t>();
  terms.sum = torch::zeros({}, states.options().dtype(torch::kFloat));
  for (std::int64_t start = 0; start < flat.size(0); start += output.chunk) {
    const std::int64_t size = std::min(output.chunk, flat.size(0) - start);
    torch::Tensor chunk_targets = flat.narrow(0, start, size);
    if (output.drop_boundary_token && start > 0) {
      chunk_targets = chunk_targets.clone();
      chunk_targets.index_put_({0}, output.ignore_index);
    }
    const auto loss_of = [layer = output.layer, chunk_targets, ignore = output.ignore_index,
                          observe](const torch::Tensor& states_of_chunk) {
      const torch::Tensor logits = layer(states_of_chunk);
      if (observe) {
        const torch::NoGradGuard no_grad;
        observe(logits, chunk_targets);
      }
      // Outside autocast, as the unchunked loss is taken (ForwardLoss).
      const compat::AutocastScope off(logits.device().type(), compat::AutocastState{});
      return CrossEntropyTotal(logits, chunk_targets, ignore);
    };
    const torch::Tensor states_of_chunk = states.narrow(0, start, size);
    terms.sum = terms.sum + (recorded ? CheckpointedForward(loss_of, states_of_chunk,
                                                            output.parameters)
                                      : loss_of(states_of_chunk));
  }
  return terms;
}

}  // namespace trainerd
