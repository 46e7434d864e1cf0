// Split-invariant dropout: each training sample's masks are a pure function of (the job's
// seed, the sample's index in the training stream, the dropout site), never of the order in
// which a shared generator is drawn. So the microbatch split of an update, the recompute of a
// checkpointed block and a resume under another plan all see the same masks, and a plan with
// accumulation computes exactly the job of the real large batch (the parity check compares
// them). The sample index already names the update: sample i of update u is stream index
// u * effective_batch + i (Trainer::Microbatches).
//
// The training loop opens a SampleStreamScope around each microbatch's forward and backward.
// Row b's key is Mix(seed, first_sample + b, site), and a mask is drawn one of two ways:
// - DropoutMasks::kRegenerated (the default): element j of row b is kept when a counter-based
//   hash (dropout_counters.h) is below (1 - p) of its range. One pass over the tensor applies it,
//   on CPU tensors; nothing is kept for backward, which hashes the same counters again.
// - DropoutMasks::kStored (model.kernels: explicit, and any tensor not on the CPU): a Bernoulli
//   draw per row from a generator seeded with the key, kept for backward like LibTorch's own
//   dropout (one tensor of the input's dtype).
// Outside a scope (a forward called directly, as some tests do) it is ordinary dropout from
// the default generator. Costs: docs/benchmarks.md, "Split-invariant dropout".
#pragma once

#include <torch/nn/cloneable.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include <optional>

#include "trainerd/trainer/data/dataset.h"
#include "trainerd/trainer/semantics/dropout_counters.h"

namespace torch::autograd {
struct AutogradContext;
}  // namespace torch::autograd

namespace trainerd {

// Makes `stream` (or none) current on this thread until destroyed; nests.
class SampleStreamScope {
 public:
  explicit SampleStreamScope(std::optional<SampleStream> stream);
  ~SampleStreamScope();
  SampleStreamScope(const SampleStreamScope&) = delete;
  SampleStreamScope& operator=(const SampleStreamScope&) = delete;

  static const std::optional<SampleStream>& Current();

 private:
  std::optional<SampleStream> previous_;
};

enum class DropoutMasks { kRegenerated, kStored };

class SampleDropoutImpl : public torch::nn::Cloneable<SampleDropoutImpl> {
 public:
  // `site` must differ between the dropout modules of one model.
  SampleDropoutImpl(double p, int site, DropoutMasks masks = DropoutMasks::kRegenerated);
  void reset() override {}
  torch::Tensor forward(const torch::Tensor& x);
  double p() const { return p_; }
  // The counters of the mask this module draws now, for a kernel that applies the mask itself
  // (BlockwiseCausalAttention): the current sample stream's, or a random key outside one;
  // none where it draws no mask (evaluation, p = 0).
  std::optional<DropoutCounters> counters() const;

 private:
  double p_;
  int site_;
  DropoutMasks masks_;
};
TORCH_MODULE(SampleDropout);

// Keeps a mask's counters (or none) in an autograd function's context, for a backward that
// draws the mask again, and reads them back.
void SaveDropoutCounters(torch::autograd::AutogradContext* context,
                         const std::optional<DropoutCounters>& counters);
std::optional<DropoutCounters> SavedDropoutCounters(
    const torch::autograd::AutogradContext* context);

}  // namespace trainerd
