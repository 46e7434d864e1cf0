#include "trainerd/trainer/plan/parity.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>

#include "trainerd/trainer/loop/trainer.h"
#include "trainerd/trainer/plan/memory_ledger.h"

namespace trainerd {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// |a - b| / |b|; 0 when both are 0, inf when only b is, NaN when either is.
double Relative(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
  if (a == b) return 0;
  return std::fabs(a - b) / std::fabs(b);
}

double Norm(const torch::Tensor& t) { return t.to(torch::kDouble).norm().item<double>(); }

bool AllFinite(const torch::Tensor& t) { return torch::isfinite(t).all().item<bool>(); }

using Tensors = std::map<std::string, torch::Tensor>;

Tensors Snapshot(TrainableModel& model, bool gradients) {
  Tensors out;
  for (const auto& item : model.named_parameters()) {
    const torch::Tensor& t = gradients ? item.value().grad() : item.value();
    if (t.defined())
      out[item.key()] =
          t.detach().to(torch::kCPU, torch::kFloat, /*non_blocking=*/false, /*copy=*/true);
  }
  return out;
}

// One side of the comparison: a trainer and what it saw before clipping.
struct Side {
  Side(const JobSpec& spec, const Dataset& corpus, EventSink* sink) : trainer(spec, corpus, sink) {
    trainer.set_before_clip([this](double) { gradients = Snapshot(trainer.model(), true); });
    // Dropout the trainer does not own (a TorchScript model's draws from the default
    // generator) has masks that depend on the split: both sides run without it.
    own_dropout_switched_off = trainer.model().SwitchOffOwnDropout();
  }
  // Sets the model's parameters to `parameters` (another side's, of the same model), as the
  // state the next update starts from.
  void StartFrom(const Tensors& parameters) {
    const torch::NoGradGuard no_grad;
    for (auto& item : trainer.model().named_parameters()) {
      const auto found = parameters.find(item.key());
      if (found != parameters.end()) item.value().copy_(found->second);
    }
    after = Snapshot(trainer.model(), false);
  }
  UpdateStats Update(int update) {
    gradients.clear();
    // Nothing moves the parameters between updates: the last update's `after` is `before`.
    before = after.empty() ? Snapshot(trainer.model(), false) : std::move(after);
    const UpdateStats stats = trainer.TrainUpdate(update);
    after = Snapshot(trainer.model(), false);
    return stats;
  }
  Trainer trainer;
  Tensors gradients, before, after;
  int own_dropout_switched_off = 0;
};

class Comparison {
 public:
  Comparison(int update, ParityReport* report) : update_(update), report_(report) {}

  void Scalar(const char* what, double plan, double reference, double tolerance) {
    const double diff = Relative(plan, reference);
    if (!std::isfinite(plan) || !std::isfinite(reference)) {
      Fail(std::string(what) + " is not finite (plan " + Number(plan) + ", reference " +
           Number(reference) + ")");
    } else if (!(diff <= tolerance)) {
      Fail(std::string(what) + " differs by " + Number(diff) + " relative (plan " + Number(plan) +
           ", reference " + Number(reference) + "; tolerance " + Number(tolerance) + ")");
    }
  }

  // ||plan - reference|| / ||reference|| per tensor; the worst one is judged.
  void Tensorwise(const char* what, const Tensors& plan, const Tensors& reference, double tolerance,
                  double* worst, std::string* worst_name) {
    for (const auto& [name, ref] : reference) {
      if (!plan.contains(name)) {
        Fail(std::string(what) + " of " + name + " exists in the reference but not in the plan");
        continue;
      }
      const torch::Tensor& mine = plan.at(name);
      if (!AllFinite(mine) || !AllFinite(ref)) {
        Fail(std::string(what) + " of " + name + " is not finite");
        *worst = kInf;
        *worst_name = name;
        continue;
      }
      const double diff = Norm(mine - ref);
      const double size = Norm(ref);
      const double relative = diff == 0 ? 0 : size == 0 ? kInf : diff / size;
      if (relative > *worst || worst_name->empty()) {
        *worst = relative;
        *worst_name = name;
      }
    }
    for (const auto& [name, mine] : plan) {
      if (!reference.contains(name)) {
        Fail(std::string(what) + " of " + name + " exists in the plan but not in the reference");
      }
    }
    if (*worst > tolerance) {
      Fail(std::string(what) + " of " + *worst_name + " differs by " + Number(*worst) +
           " relative (tolerance " + Number(tolerance) + ")");
    }
  }

  void Fail(const std::string& sentence) {
    report_->failures.push_back("update " + std::to_string(update_ + 1) + ": " + sentence);
  }

  static std::string Number(double x) {
    char text[32];
    std::snprintf(text, sizeof text, "%.3g", x);
    return text;
  }

 private:
  int update_;
  ParityReport* report_;
};

void CompareUpdate(int update, const Side& plan, const Side& reference, const UpdateStats& p,
                   const UpdateStats& r, ParityReport* report) {
  const ParityTolerances& tol = report->tolerances;
  ParityUpdate u;
  u.loss = {p.loss, r.loss};
  u.lr = {p.lr, r.lr};
  u.grad_norm = {p.grad_norm, r.grad_norm};
  u.skipped = {p.skipped, r.skipped};
  Comparison check(update, report);
  check.Scalar("the loss", p.loss, r.loss, tol.loss);
  check.Scalar("the learning rate", p.lr, r.lr, tol.learning_rate);
  if (p.skipped != r.skipped) {
    check.Fail(std::string("the fp16 loss scaler skipped the step in the ") +
               (p.skipped ? "plan" : "reference") + " only");
  } else if (!p.skipped) {
    check.Scalar("the gradient norm before clipping", p.grad_norm, r.grad_norm, tol.grad_norm);
    check.Tensorwise("the gradient before clipping", plan.gradients, reference.gradients,
                     tol.gradient, &u.gradient_diff, &u.gradient_parameter);
  }
  // Each update's step, plan against reference: what the optimizer did with the gradient,
  // judged over all parameters together (a bf16 sign flip of a tiny bias gradient moves one
  // small tensor by up to two steps under AdamW), the worst tensor reported for diagnosis.
  double diff_squares = 0, step_squares = 0;
  for (const auto& [name, after] : reference.after) {
    if (!plan.after.contains(name)) continue;  // reported by the gradient comparison
    const torch::Tensor reference_step = after - reference.before.at(name);
    const torch::Tensor plan_step = plan.after.at(name) - plan.before.at(name);
    const double diff = Norm(plan_step - reference_step), step = Norm(reference_step);
    diff_squares += diff * diff;
    step_squares += step * step;
    const double relative = diff == 0 ? 0 : step == 0 ? kInf : diff / step;
    if (u.worst_tensor_step_parameter.empty() || !(relative <= u.worst_tensor_step_diff)) {
      u.worst_tensor_step_diff = relative;
      u.worst_tensor_step_parameter = name;
    }
  }
  u.step_diff = diff_squares == 0 ? 0 : std::sqrt(diff_squares / step_squares);
  if (!(u.step_diff <= tol.step)) {
    check.Fail("the optimizer step differs by " + Comparison::Number(u.step_diff) +
               " relative over all parameters (tolerance " + Comparison::Number(tol.step) +
               "; worst tensor " + u.worst_tensor_step_parameter + ")");
  }
  report->updates.push_back(u);
}

// The shape both runs use: the job's, or the effective batch halved until the reference's
// measured peak fits the usable memory, the plan keeping at least two microbatches when it
// accumulates.
Result<JobSpec> ReferenceShape(const JobSpec& spec, const Dataset& corpus, JobSpec* plan,
                               nlohmann::json* reduction) {
  JobSpec reference = spec;
  const bool accumulates = spec.plan.accumulation_steps > 1;
  const int smallest = accumulates ? 2 : 1;
  for (;;) {
    reference.plan = PlanSpec{reference.training.effective_batch, 1, {}, Precision::kFp32};
    Result<MemoryLedger> ledger = MeasureLedger(reference, corpus);
    if (!ledger.ok()) return ledger.status();
    if (ledger->peak_bytes <= spec.memory.usable_bytes() ||
        reference.training.effective_batch / 2 < smallest) {
      break;
    }
    reference.training.effective_batch /= 2;
  }
  *plan = spec;
  const int batch = reference.training.effective_batch;
  if (batch == spec.training.effective_batch) return reference;
  PlanSpec& p = plan->plan;
  plan->training.effective_batch = batch;
  p.microbatch = std::min(p.microbatch, accumulates ? (batch + 1) / 2 : batch);
  p.accumulation_steps = (batch + p.microbatch - 1) / p.microbatch;
  *reduction = {{"effective_batch", {spec.training.effective_batch, batch}},
                {"microbatch", {spec.plan.microbatch, p.microbatch}},
                {"accumulation_steps", {spec.plan.accumulation_steps, p.accumulation_steps}},
                {"why", "the reference (the real large batch) does not fit the usable memory"}};
  return reference;
}

}  // namespace

ParityTolerances ToleranceFor(Precision precision, bool fp16_computes_in_fp32) {
  const bool fp32_math =
      precision == Precision::kFp32 || (precision == Precision::kFp16 && fp16_computes_in_fp32);
  if (fp32_math) return {1e-5, 1e-12, 1e-5, 1e-4, 1e-3};
  return {2e-3, 1e-12, 2e-2, 1e-1, 0.3};
}

Result<ParityReport> CheckParity(const JobSpec& spec, const Dataset& corpus, int updates,
                                 TrainingFault fault) {
  ParityReport report;
  report.plan = spec.plan;
  JobSpec plan_spec;
  Result<JobSpec> reference_spec = ReferenceShape(spec, corpus, &plan_spec, &report.reduction);
  if (!reference_spec.ok()) return reference_spec.status();
  report.checked_plan = plan_spec.plan;
  report.checked_effective_batch = plan_spec.training.effective_batch;
  report.tolerances = ToleranceFor(spec.plan.precision, spec.runtime.device != "cuda");
  NullEventSink discard;
  try {
    Side plan(plan_spec, corpus, &discard);
    Side reference(*reference_spec, corpus, &discard);
    plan.trainer.set_test_only_fault(fault);
    report.own_dropout_switched_off = plan.own_dropout_switched_off;
    for (int update = 0; update < updates; ++update) {
      // Each update is judged from the same parameters: AdamW's first steps normalise each
      // element, so a gradient element within rounding of zero takes a visibly different step
      // on each side (seen: 0.4% of position_embedding's step at update 1), and left alone that
      // would compound into later gradients beyond their tolerance. The optimizer's state and
      // the schedule stay each side's own, so a fault of either still shows.
      if (update > 0) plan.StartFrom(reference.after);
      const UpdateStats p = plan.Update(update);
      const UpdateStats r = reference.Update(update);
      CompareUpdate(update, plan, reference, p, r, &report);
      if (!std::isfinite(p.loss) || !std::isfinite(r.loss)) break;  // nothing left to compare
    }
  } catch (const c10::Error& e) {
    return Status::Internal(std::string("parity run: ") + e.what_without_backtrace());
  }
  report.pass = report.failures.empty();
  return report;
}

}  // namespace trainerd
