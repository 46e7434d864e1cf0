#include "trainerd/trainer/loop/model_state.h"

#include "loop/fused_adamw.h"
#include "trainerd/trainer/device/device_memory.h"
#include "trainerd/trainer/device/weight_decay.h"
#include "trainerd/trainer/loop/host_model_state.h"
#include "trainerd/trainer/loop/in_backward_model_state.h"
#include "trainerd/trainer/loop/model_state_bytes.h"
#include "trainerd/trainer/loop/sharded_model_state.h"

namespace trainerd {
namespace {

// The default form: AdamW steps the model's own parameters, its state beside them.
class DeviceModelState final : public ModelState {
 public:
  DeviceModelState(TrainableModel& model, const torch::Device& device, const OptimizerSpec& spec)
      : ModelState(model, device) {
    BuildOptimizer(TrainableParameters(model_), spec);
  }

  torch::OrderedDict<std::string, torch::Tensor> stepped() const override {
    return NamedTrainableParameters(model_);
  }
  StepResult Step(const StepOptions& options) override {
    return UnscaleClipStep(TrainableParameters(model_), optimizer(), options.grad_clip,
                           options.precision, options.before_clip);
  }
  StepResult MeasureSkipped(const BeforeClip& before_clip) override {
    return MeasureWithoutStep(TrainableParameters(model_), before_clip);
  }
  void Count(MemorySnapshot* snapshot) const override {
    snapshot->gradients_bytes = GradientBytes(model_);
    snapshot->optimizer_state_bytes = AdamWStateBytes(optimizer());
  }
  Result<CheckpointState> LoadCheckpoint(const std::string& path,
                                         const std::string& job_identity) override {
    return LoadTrainingCheckpoint(path, model_, optimizer(), job_identity, device_);
  }
};

}  // namespace

torch::OrderedDict<std::string, torch::Tensor> ModelState::gradients() const {
  torch::OrderedDict<std::string, torch::Tensor> out;
  for (const auto& item : stepped()) {
    if (item.value().grad().defined()) out.insert(item.key(), item.value().grad());
  }
  return out;
}

void ModelState::BuildOptimizer(const std::vector<torch::Tensor>& parameters,
                                const OptimizerSpec& spec) {
  const auto options = torch::optim::AdamWOptions(spec.lr)
                           .betas({spec.beta1, spec.beta2})
                           .weight_decay(spec.weight_decay)
                           .eps(spec.eps);
  optimizer_ = std::make_unique<FusedAdamW>(WeightDecayGroups(parameters, options), options);
}

std::unique_ptr<ModelState> MakeModelState(const JobSpec& spec, TrainableModel& model,
                                           const torch::Device& device, DataParallelGroup* group) {
  if (group != nullptr && spec.plan.zero_stage > 0) {
    return std::make_unique<ShardedModelState>(model, device, spec, group);
  }
  if (spec.plan.step_in_backward) {
    return std::make_unique<InBackwardModelState>(model, device, spec.optimizer);
  }
  if (spec.plan.optimizer_state == StatePlacement::kHost) {
    return std::make_unique<HostModelState>(model, device, spec.optimizer);
  }
  return std::make_unique<DeviceModelState>(model, device, spec.optimizer);
}

}  // namespace trainerd
