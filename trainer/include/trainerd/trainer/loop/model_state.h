// Where the model's own state lives and how an update steps it (docs/model-state.md): the
// parameters the optimizer steps, their gradients and AdamW's state. The seam every plan
// lever that moves or shrinks the model state lands in; the Trainer asks its ModelState and
// never which form it is. The forms:
//   on the device (the default): AdamW steps the model's parameters where they are;
//   the optimizer state on the host (PlanSpec::optimizer_state, host_model_state.h);
//   sharded over the ranks (PlanSpec::zero_stage, sharded_model_state.h);
//   stepped inside the backward (PlanSpec::step_in_backward, in_backward_model_state.h).
// Every form computes the same update: the arithmetic of one AdamW step on the same values.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "trainerd/common/status.h"
#include "trainerd/trainer/distributed/data_parallel.h"
#include "trainerd/trainer/distributed/state_sharding.h"
#include "trainerd/trainer/loop/gradient_accumulation.h"
#include "trainerd/trainer/loop/training_checkpoint.h"
#include "trainerd/trainer/models/model.h"
#include "trainerd/trainer/spec/job_spec.h"
#include "trainerd/trainer/spec/worker_protocol.h"

namespace trainerd {

// How an update's gradients are stepped (UnscaleClipStep).
struct StepOptions {
  double grad_clip = 0;  // <= 0: no clipping
  PrecisionContext precision;
  BeforeClip before_clip;
  // TEST ONLY (training_fault.h): kStaleHostWeights keeps a host step's weights from the device.
  TrainingFault fault = TrainingFault::kNone;
};

class ModelState {
 public:
  virtual ~ModelState() = default;

  // The AdamW over stepped(), with the job's options (MakeModelState builds it).
  torch::optim::AdamW& optimizer() const { return *optimizer_; }
  // The parameters the optimizer steps, by the model's names, each with the gradient the
  // step uses once the update's backward is done (the parity check's observer reads them).
  virtual torch::OrderedDict<std::string, torch::Tensor> stepped() const = 0;

  // The update's forwards and backwards: `accumulate` (AccumulateGradients over its
  // microbatches, returning the mean loss) once. The step inside the backward runs it armed
  // to step each parameter as its gradient completes (`take_step`), twice where it must
  // measure the global norm to clip first.
  virtual double Backward(const std::function<double()>& accumulate, const StepOptions& /*options*/,
                          bool /*take_step*/) {
    return accumulate();
  }
  // The update's gradients unscaled, clipped and stepped where the state lives; the model's
  // parameters then hold the stepped weights.
  virtual StepResult Step(const StepOptions& options) = 0;
  // The update's gradients before clipping, by name, once its backward is done (the parity
  // check compares them): stepped()'s where they are kept; those the step inside the backward
  // copied to the host as they came, where options.before_clip asked for them.
  virtual torch::OrderedDict<std::string, torch::Tensor> gradients() const;
  // MeasureWithoutStep on the gradients Step would have used.
  virtual StepResult MeasureSkipped(const BeforeClip& before_clip) = 0;
  // The sharding the microbatches' gradients are summed into (AccumulateGradients); nullptr
  // for an unsharded state.
  virtual StateSharding* sharding() { return nullptr; }

  // Its bytes at this moment, into `snapshot`: gradients, and the optimizer state on the
  // device or everything kept on the host.
  virtual void Count(MemorySnapshot* snapshot) const = 0;
  // What it keeps in host memory, for the ledger; nullopt when nothing.
  virtual std::optional<HostLedger> HostBytes(const MemorySpec& /*memory*/) const {
    return std::nullopt;
  }
  // Why it cannot be kept within the host budget of `memory` (on this rank or another of
  // `group`: a collective where any rank keeps state on the host), suffixed "nothing was
  // trained"; nullopt when it can.
  virtual std::optional<std::string> HostBudgetRefusal(const MemorySpec& /*memory*/,
                                                       DataParallelGroup* /*group*/) const {
    return std::nullopt;
  }
  // The model's parameters were set from outside the loop (the parity check starts every
  // update from the reference's): the state takes them.
  virtual void AdoptModelWeights() {}

  // The training checkpoint at `path` into the model and the optimizer (LoadTrainingCheckpoint).
  virtual Result<CheckpointState> LoadCheckpoint(const std::string& path,
                                                 const std::string& job_identity) = 0;
  // The optimizer whose state a checkpoint holds: AdamW over every parameter, gathered from
  // the shards (a collective on every rank), or nullptr where optimizer() holds it all.
  virtual std::unique_ptr<torch::optim::AdamW> GatheredOptimizer() const { return nullptr; }

 protected:
  ModelState(TrainableModel& model, const torch::Device& device) : model_(model), device_(device) {}
  // The optimizer over `parameters`; each form's constructor calls it once.
  void BuildOptimizer(const std::vector<torch::Tensor>& parameters, const OptimizerSpec& spec);

  TrainableModel& model_;
  torch::Device device_;

 private:
  std::unique_ptr<torch::optim::AdamW> optimizer_;
};

// The form `plan` chooses for `model` (already on `device`): sharded when the plan has a ZeRO
// stage and `group` is set (one rank owns all the state: a sharded plan's RankJob is the
// unsharded one), stepped inside the backward per plan.step_in_backward, on the host per
// plan.optimizer_state, else on the device.
std::unique_ptr<ModelState> MakeModelState(const JobSpec& spec, TrainableModel& model,
                                           const torch::Device& device, DataParallelGroup* group);

}  // namespace trainerd
