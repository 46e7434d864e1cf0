// The model state of a plan that takes the optimizer step inside the backward
// (PlanSpec::step_in_backward, docs/model-state.md): AdamW's state on the device, as the
// default form keeps it, but each trainable parameter is stepped the moment autograd has
// accumulated its gradient (a post-hook on its gradient accumulator), and that gradient is
// freed, so that the update's gradients are never all alive at once: the ledger's gradients
// become one parameter's at a time.
//
// The same update, exactly, where the plan is allowed (StepInBackwardRefusal): one microbatch
// per update, so a parameter's gradient is complete after its accumulator runs once; a tied
// weight's accumulator runs once, after both uses. Clipping needs the global norm before any
// step: with training.grad_clip the update runs its forward and backward twice, the first
// only measuring every gradient's norm (and freeing it), the second stepping each with the
// clip that norm gives. The second forward must compute the first's loss: the trainer's
// dropout is keyed by sample, and the second pass starts from the default generators' state
// (a model's own dropout) and the model's buffers (BatchNorm's running statistics, advanced
// once per update as by the other forms) as the first found them; a loss that still differs
// is an error.
// A non-finite gradient: the two-pass update takes no step; the one-pass update has stepped
// the parameters before it (the run stops on it either way, as for every form).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "trainerd/trainer/loop/model_state.h"
#include "trainerd/trainer/spec/job_spec.h"

namespace trainerd {

// Elements of a gradient whose fp64 copy the step's norm makes at a time (16 bytes each: the
// copy and its square).
inline constexpr std::int64_t kNormSlice = std::int64_t{1} << 16;

class InBackwardModelState final : public ModelState {
 public:
  // AdamW over `model`'s trainable parameters (on `device`), and a hook on each one's
  // gradient accumulator.
  InBackwardModelState(TrainableModel& model, const torch::Device& device,
                       const OptimizerSpec& spec);
  // Takes the hooks off the accumulators.
  ~InBackwardModelState() override;

  torch::OrderedDict<std::string, torch::Tensor> stepped() const override {
    return NamedTrainableParameters(model_);
  }
  // One armed pass without clipping; with it a measuring pass, then a stepping one.
  double Backward(const std::function<double()>& accumulate, const StepOptions& options,
                  bool take_step) override;
  // The result of the steps the backward took: the norm, or the non-finite gradient.
  StepResult Step(const StepOptions& options) override;
  StepResult MeasureSkipped(const BeforeClip& before_clip) override;
  torch::OrderedDict<std::string, torch::Tensor> gradients() const override;
  void Count(MemorySnapshot* snapshot) const override;
  Result<CheckpointState> LoadCheckpoint(const std::string& path,
                                         const std::string& job_identity) override;

  // What a backward does with each gradient as it completes (shared with the hooks).
  struct Pass;

 private:
  // Runs `accumulate` with the hooks measuring every gradient (kept on the host with `keep`;
  // with `step`, stepped scaled by `clip`); the mean loss.
  double Run(const std::function<double()>& accumulate, bool step, double clip, bool keep);

  std::shared_ptr<Pass> pass_;
  // Each parameter's gradient accumulator (held: autograd keeps it only while a graph uses
  // it, and a new one would not have the hook) with its hook's key.
  std::vector<std::pair<std::shared_ptr<torch::autograd::Node>, std::uintptr_t>> hooks_;
  StepResult result_;
};

}  // namespace trainerd
