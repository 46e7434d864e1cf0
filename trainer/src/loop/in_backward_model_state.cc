#include "trainerd/trainer/loop/in_backward_model_state.h"

#include <cmath>

#include "trainerd/trainer/device/torch_compat.h"
#include "trainerd/trainer/loop/model_state_bytes.h"

namespace trainerd {
namespace {

// GlobalGradNorm's fp64 arithmetic, up to fp64 rounding, a slice of kNormSlice elements at a
// time: inside the backward the activations are still alive beside a whole fp64 copy.
torch::Tensor SquaredNorm(const torch::Tensor& grad) {
  torch::Tensor sum = torch::zeros({}, grad.options().dtype(torch::kDouble));
  for (const torch::Tensor& slice : grad.reshape(-1).split(kNormSlice)) {
    sum += slice.to(torch::kDouble).square().sum();
  }
  return sum;
}

}  // namespace

struct InBackwardModelState::Pass {
  // Called once a parameter's gradient is complete: its norm counted (and the gradient kept
  // on the host where asked), then with `step` the gradient scaled by `clip` and stepped, and
  // freed either way.
  void Completed(torch::Tensor& parameter, const std::string& name) {
    const torch::NoGradGuard no_grad;
    torch::Tensor& grad = parameter.mutable_grad();
    if (!grad.defined()) return;
    const torch::Tensor square = SquaredNorm(grad);
    squares = squares.defined() ? squares + square : square;
    if (keep) kept.insert(name, grad.to(torch::kCPU, torch::kFloat, false, /*copy=*/true));
    if (step) {
      if (clip < 1) grad.mul_(clip);
      optimizer->step();  // the only parameter with a gradient at this moment
    }
    grad.reset();
  }
  // The global L2 norm of the gradients the pass saw (GlobalGradNorm's).
  double Norm() const { return squares.defined() ? std::sqrt(squares.item<double>()) : 0.0; }

  torch::optim::Optimizer* optimizer = nullptr;
  bool step = false;
  double clip = 1;
  bool keep = false;
  torch::Tensor squares;  // fp64, on the device: read once the pass is done
  torch::OrderedDict<std::string, torch::Tensor> kept;
};

namespace {

// Autograd's post-hook on a parameter's gradient accumulator: runs after the accumulator has
// put the parameter's whole gradient in .grad.
class StepWhenComplete final : public torch::autograd::FunctionPostHook {
 public:
  StepWhenComplete(std::shared_ptr<InBackwardModelState::Pass> pass, torch::Tensor parameter,
                   std::string name)
      : pass_(std::move(pass)), parameter_(std::move(parameter)), name_(std::move(name)) {}
  torch::autograd::variable_list operator()(
      const torch::autograd::variable_list& outputs,
      const torch::autograd::variable_list& /*inputs*/) override {
    pass_->Completed(parameter_, name_);
    return outputs;
  }

 private:
  std::shared_ptr<InBackwardModelState::Pass> pass_;
  torch::Tensor parameter_;
  std::string name_;
};

}  // namespace

InBackwardModelState::InBackwardModelState(TrainableModel& model, const torch::Device& device,
                                           const OptimizerSpec& spec)
    : ModelState(model, device), pass_(std::make_shared<Pass>()) {
  BuildOptimizer(TrainableParameters(model_), spec);
  pass_->optimizer = &optimizer();
  for (const auto& item : NamedTrainableParameters(model_)) {
    std::shared_ptr<torch::autograd::Node> accumulator =
        torch::autograd::impl::grad_accumulator(item.value());
    const std::uintptr_t key = accumulator->add_post_hook(
        std::make_unique<StepWhenComplete>(pass_, item.value(), item.key()));
    hooks_.emplace_back(std::move(accumulator), key);
  }
}

InBackwardModelState::~InBackwardModelState() {
  for (auto& [accumulator, key] : hooks_) accumulator->del_post_hook(key);
}

double InBackwardModelState::Run(const std::function<double()>& accumulate, bool step, double clip,
                                 bool keep) {
  pass_->step = step;
  pass_->clip = clip;
  pass_->keep = keep;
  pass_->squares = torch::Tensor();
  pass_->kept.clear();
  return accumulate();
}

double InBackwardModelState::Backward(const std::function<double()>& accumulate,
                                      const StepOptions& options, bool take_step) {
  const bool keep = static_cast<bool>(options.before_clip);
  // kStepBeforeClip: the classic mistake, each parameter stepped with its unclipped gradient.
  const bool clips = options.grad_clip > 0 && options.fault != TrainingFault::kStepBeforeClip;
  result_ = {};
  result_.skipped = !take_step;
  // The stepping pass starts where the measuring one did: the default generators (a model's
  // own dropout draws from them) and the model's buffers (BatchNorm's running statistics,
  // which each forward advances) as they were before it.
  const compat::RngState rng = clips ? compat::CaptureRng(device_) : compat::RngState{};
  std::vector<torch::Tensor> buffers;
  if (clips) {
    for (const torch::Tensor& b : model_.buffers()) buffers.push_back(b.clone());
  }
  const double first = Run(accumulate, take_step && !clips, 1.0, keep);
  result_.grad_norm = pass_->Norm();
  result_.nonfinite_gradient = !std::isfinite(result_.grad_norm);
  if (!std::isfinite(first) || result_.nonfinite_gradient) return first;
  if (options.before_clip) options.before_clip(result_.grad_norm);
  if (!clips || !take_step) return first;
  const double coefficient = std::min(1.0, options.grad_clip / (result_.grad_norm + 1e-6));
  compat::RestoreRng(rng);
  {
    const torch::NoGradGuard no_grad;
    const std::vector<torch::Tensor> now = model_.buffers();
    for (std::size_t i = 0; i < now.size(); ++i) now[i].copy_(buffers[i]);
  }
  const double second = Run(accumulate, /*step=*/true, coefficient, /*keep=*/false);
  // The clip is the first pass's: exact only where the second computes the same update (a
  // source of randomness neither the generators nor the buffers hold would break it).
  TORCH_CHECK(std::fabs(second - first) <= 1e-6 * std::fabs(first),
              "plan.step_in_backward with training.grad_clip: the stepping pass's loss ", second,
              " differs from the measuring pass's ", first,
              ": the model draws randomness the trainer cannot replay, so the clip measured on "
              "the first pass would not be the second's; train without the lever or the clip");
  return second;
}

StepResult InBackwardModelState::Step(const StepOptions& /*options*/) { return result_; }

StepResult InBackwardModelState::MeasureSkipped(const BeforeClip& /*before_clip*/) {
  return result_;  // Backward measured without stepping (take_step false) and saw it
}

torch::OrderedDict<std::string, torch::Tensor> InBackwardModelState::gradients() const {
  return pass_->kept;
}

void InBackwardModelState::Count(MemorySnapshot* snapshot) const {
  // None kept: a parameter's lives from its accumulation to its step, inside the backward,
  // and shows in the update's peak among the temporaries.
  snapshot->gradients_bytes = 0;
  snapshot->optimizer_state_bytes = AdamWStateBytes(optimizer());
}

Result<CheckpointState> InBackwardModelState::LoadCheckpoint(const std::string& path,
                                                             const std::string& job_identity) {
  return LoadTrainingCheckpoint(path, model_, optimizer(), job_identity, device_);
}

}  // namespace trainerd
