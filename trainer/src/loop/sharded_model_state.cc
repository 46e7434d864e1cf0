#include "trainerd/trainer/loop/sharded_model_state.h"

#include "trainerd/trainer/loop/model_state_bytes.h"

namespace trainerd {

ShardedModelState::ShardedModelState(TrainableModel& model, const torch::Device& device,
                                     const JobSpec& spec, DataParallelGroup* group)
    : ModelState(model, device),
      group_(group),
      sharding_(TrainableParameters(model), spec.plan.zero_stage, spec.plan.accumulation_steps,
                group) {
  BuildOptimizer(sharding_.owned(), spec.optimizer);
}

StepResult ShardedModelState::Step(const StepOptions& options) {
  const StepResult result =
      UnscaleClipStep(sharding_.with_gradients(), optimizer(), options.grad_clip, options.precision,
                      options.before_clip, shards());
  if (!result.skipped && !result.nonfinite_gradient) sharding_.BroadcastWeights();
  return result;
}

StepResult ShardedModelState::MeasureSkipped(const BeforeClip& before_clip) {
  return MeasureWithoutStep(sharding_.with_gradients(), before_clip, shards());
}

void ShardedModelState::Count(MemorySnapshot* snapshot) const {
  snapshot->gradients_bytes =
      sharding_.stage() == 2 ? GradientBytes(sharding_.owned()) : GradientBytes(model_);
  snapshot->optimizer_state_bytes = AdamWStateBytes(optimizer());
}

Result<CheckpointState> ShardedModelState::LoadCheckpoint(const std::string& path,
                                                          const std::string& job_identity) {
  const std::unique_ptr<torch::optim::AdamW> full = sharding_.FullOptimizer(optimizer());
  Result<CheckpointState> state =
      LoadTrainingCheckpointThroughHost(path, model_, *full, job_identity, device_);
  if (state.ok()) sharding_.TakeOptimizerState(*full, optimizer(), device_);
  return state;
}

}  // namespace trainerd
