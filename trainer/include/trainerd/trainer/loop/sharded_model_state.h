// The model state of a plan sharded over the ranks of a data-parallel group (ZeRO stage 1 or
// 2, PlanSpec::zero_stage, docs/model-state.md): the rank's optimizer holds AdamW's state of
// its own shard only and steps it (StateSharding); after the step every parameter takes its
// owner's value. Stage 2 also keeps only the shard's gradients through the step.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>

#include "trainerd/trainer/distributed/state_sharding.h"
#include "trainerd/trainer/loop/model_state.h"

namespace trainerd {

class ShardedModelState final : public ModelState {
 public:
  // `model`'s trainable parameters sharded over `group` per spec.plan (its ZeRO stage and its
  // microbatches per update), and AdamW over this rank's shard.
  ShardedModelState(TrainableModel& model, const torch::Device& device, const JobSpec& spec,
                    DataParallelGroup* group);

  // The model's parameters; under stage 2 only the shard's have their gradients at the step.
  torch::OrderedDict<std::string, torch::Tensor> stepped() const override {
    return NamedTrainableParameters(model_);
  }
  // The step of the shard (its norm and overflow over every rank's under stage 2), then the
  // owners' weights broadcast.
  StepResult Step(const StepOptions& options) override;
  StepResult MeasureSkipped(const BeforeClip& before_clip) override;
  StateSharding* sharding() override { return &sharding_; }
  void Count(MemorySnapshot* snapshot) const override;
  // The file holds every parameter's state: loaded in host memory, this rank keeps its shard.
  Result<CheckpointState> LoadCheckpoint(const std::string& path,
                                         const std::string& job_identity) override;
  // Every rank's shard of AdamW's state, in host memory. A collective.
  std::unique_ptr<torch::optim::AdamW> GatheredOptimizer() const override {
    return sharding_.GatherOptimizerState(optimizer());
  }

 private:
  // The group the step's norm and overflow are taken over: the shards' under stage 2.
  DataParallelGroup* shards() const { return sharding_.stage() == 2 ? group_ : nullptr; }

  DataParallelGroup* group_;
  StateSharding sharding_;
};

}  // namespace trainerd
