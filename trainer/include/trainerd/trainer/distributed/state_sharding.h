// ZeRO stages 1 and 2 over a data-parallel group (PlanSpec::zero_stage, docs/model-state.md).
// Every parameter has one owner: the ranks split the model's parameters, in their order, into
// contiguous shards of about equal elements (ShardOwners). A rank's optimizer holds AdamW's
// state of its own shard only and steps it; after the step each shard is broadcast from its
// owner. Stage 2 also sums each gradient into its owner's alone, after every microbatch, and
// the other ranks drop theirs: between microbatches and through the step a rank holds its
// shard's gradients. Both compute what the unsharded ranks compute: the same sums, the norm
// over every shard, AdamW's arithmetic on each element.
#pragma once

#include <torch/torch.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "trainerd/trainer/distributed/data_parallel.h"

namespace trainerd {

class StateSharding {
 public:
  // `parameters`: the model's, in its order, the same on every rank of `group`. `microbatches`:
  // the plan's per update (the largest share's; a smaller share may have fewer).
  StateSharding(std::vector<torch::Tensor> parameters, int stage, int microbatches,
                DataParallelGroup* group);

  int stage() const { return stage_; }
  // This rank's shard: the parameters its optimizer steps.
  const std::vector<torch::Tensor>& owned() const { return owned_; }
  // The parameters whose gradients this rank holds when the step starts: its shard under
  // stage 2, every parameter under stage 1.
  const std::vector<torch::Tensor>& with_gradients() const {
    return stage_ == 2 ? owned_ : parameters_;
  }

  // Stage 2, after a microbatch's backward: each gradient summed over the ranks into its
  // owner's; the other ranks' gradients are dropped (their next backward starts them afresh).
  // A parameter takes part where any rank holds its gradient (the ranks agree on it first:
  // an owner keeps its zeroed gradient between updates, the others do not).
  void SumGradientsToOwners();
  // Stage 2, after this rank's `done` microbatches: the sums of the plan's other microbatches,
  // which a rank of a smaller share joins with nothing new to add.
  void SumRemainingMicrobatches(std::size_t done);
  // After a step: every parameter set to its owner's value.
  void BroadcastWeights();

  // An AdamW over every parameter, with `shard`'s options and every rank's shard of its state
  // in host memory: what a training checkpoint holds, the same file as an unsharded plan's.
  // A collective.
  std::unique_ptr<torch::optim::AdamW> GatherOptimizerState(torch::optim::AdamW& shard) const;
  // An empty AdamW over every parameter with `shard`'s options: what a checkpoint loads into
  // before TakeOptimizerState.
  std::unique_ptr<torch::optim::AdamW> FullOptimizer(torch::optim::AdamW& shard) const;
  // This rank's shard of `full`'s state (a loaded checkpoint's) into `shard`, on `device`.
  void TakeOptimizerState(torch::optim::AdamW& full, torch::optim::AdamW& shard,
                          const torch::Device& device) const;

 private:
  std::vector<torch::Tensor> parameters_;
  std::vector<int> owners_;
  std::vector<torch::Tensor> owned_;
  int stage_;
  std::size_t microbatches_;
  DataParallelGroup* group_;
};

// The owner rank of each parameter of `numels` elements: contiguous shards in order, each
// parameter to the rank whose equal part of all the elements holds its middle element.
std::vector<int> ShardOwners(const std::vector<std::int64_t>& numels, int ranks);

// The bytes of the trainable `parameters` outside the largest shard (by bytes) when they are
// sharded over `ranks` (0 for one rank): one copy of what the rank holding the most does not
// keep of a sharded category. AdamW's state is two such copies, the gradients one.
std::int64_t BytesOutsideLargestShard(const std::vector<torch::Tensor>& parameters, int ranks);
// The AdamW state (two moments) of `parameters` that the rank holding the most does not keep.
inline std::int64_t OptimizerStateOnOtherRanks(const std::vector<torch::Tensor>& parameters,
                                               int ranks) {
  return 2 * BytesOutsideLargestShard(parameters, ranks);
}

}  // namespace trainerd
