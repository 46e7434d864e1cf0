#include "trainerd/trainer/plan/parity.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "trainerd/trainer/device/device_memory.h"
#include "trainerd/trainer/loop/trainer.h"
#include "trainerd/trainer/models/build_model.h"
#include "trainerd/trainer/plan/memory_ledger.h"
#include "trainerd/trainer/spec/accumulation_steps.h"
#include "trainerd/trainer/spec/units.h"

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

// ||a - b|| / ||b||; 0 when equal, inf when only b is zero.
double RelativeNorm(const torch::Tensor& a, const torch::Tensor& b) {
  const double diff = Norm(a - b);
  const double size = Norm(b);
  return diff == 0 ? 0 : size == 0 ? kInf : diff / size;
}

bool AllFinite(const torch::Tensor& t) { return torch::isfinite(t).all().item<bool>(); }

using Tensors = std::map<std::string, torch::Tensor>;

Tensors Snapshot(const torch::OrderedDict<std::string, torch::Tensor>& tensors) {
  Tensors out;
  for (const auto& item : tensors) {
    out[item.key()] =
        item.value().detach().to(torch::kCPU, torch::kFloat, /*non_blocking=*/false, /*copy=*/true);
  }
  return out;
}

// One side of the comparison: a trainer, and what its update saw before clipping and left.
// The gradients are those the step uses (their host copies when the plan keeps the
// optimizer state on the host); the parameters after it are the model's.
struct Side {
  Side(const JobSpec& spec, const Dataset& corpus, EventSink* sink) : trainer(spec, corpus, sink) {
    trainer.set_before_clip(
        [this](double) { gradients = Snapshot(trainer.model_state().gradients()); });
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
    trainer.model_state().AdoptModelWeights();
  }
  // Trains update `update`, or with `replay_skip` computes it and skips its step as the plan's
  // fp16 loss scaler did.
  UpdateStats Update(int update, bool replay_skip) {
    std::optional<HostMemoryScope> host;
    if (on_host) host.emplace();
    const UpdateStats stats =
        replay_skip ? trainer.ReplaySkip(update) : trainer.TrainUpdate(update);
    after = Snapshot(NamedTrainableParameters(trainer.model()));
    return stats;
  }
  // Frees the snapshots once judged.
  void Forget() {
    gradients.clear();
    after.clear();
  }
  Trainer trainer;
  Tensors gradients, after;
  int own_dropout_switched_off = 0;
  bool on_host = false;  // built and run in host memory (ParityMemory::reference_on_host)
};

// The reference side, in host memory when the check's memory says so.
std::unique_ptr<Side> MakeReference(const JobSpec& spec, const Dataset& corpus, EventSink* sink,
                                    bool on_host) {
  std::optional<HostMemoryScope> host;
  if (on_host) host.emplace();
  auto side = std::make_unique<Side>(spec, corpus, sink);
  side->on_host = on_host;
  return side;
}

// Judges one comparison (the plan run in one precision against the reference), update by
// update, into its ParityComparison and the report's failures.
class Judge {
 public:
  Judge(ParityComparison* comparison, std::vector<std::string>* failures)
      : comparison_(comparison),
        failures_(failures),
        label_(std::string(ToString(comparison->precision)) + " " + comparison->judges) {}

  // `start`: the parameters every side started the update from.
  void CompareUpdate(int update, const Tensors& start, const Side& plan, const Side& reference,
                     const UpdateStats& p, const UpdateStats& r) {
    const ParityTolerances& tol = comparison_->tolerances;
    update_ = update;
    ParityUpdate u;
    u.loss = {p.loss, r.loss};
    u.lr = {p.lr, r.lr};
    u.grad_norm = {p.grad_norm, r.grad_norm};
    u.skipped = p.skipped;
    Scalar("the loss", p.loss, r.loss, tol.loss);
    Scalar("the learning rate", p.lr, r.lr, tol.learning_rate);
    // The plan's own fp16 overflow leaves no gradient to compare; a side that replayed the
    // skip (the structure run) has one.
    const bool overflowed = p.skipped && std::isinf(p.grad_norm);
    if (!overflowed) {
      Scalar("the gradient norm before clipping", p.grad_norm, r.grad_norm, tol.grad_norm);
      Gradients(plan.gradients, reference.gradients, &u);
    }
    Steps(start, plan, reference, &u);  // after a skip, a parameter stepped on a side fails
    comparison_->updates.push_back(u);
  }

  // A failure of the comparison at the update it last compared.
  void Fail(const std::string& sentence) {
    failures_->push_back(label_ + ", update " + std::to_string(update_ + 1) + ": " + sentence);
  }

 private:
  static std::string Number(double x) {
    char text[32];
    std::snprintf(text, sizeof text, "%.3g", x);
    return text;
  }

  // A measured relative difference of `what`: its ratio to the tolerance is kept when it is
  // the comparison's largest, and beyond the tolerance it fails; `detail` goes with the figure.
  void Difference(const std::string& what, double diff, double tolerance,
                  const std::string& detail = "") {
    const std::string figures =
        (detail.empty() ? "" : detail + "; ") + "tolerance " + Number(tolerance);
    if (!std::isfinite(diff)) {
      Fail(what + " differs without bound (" + figures + ")");
      return;
    }
    const double ratio = diff / tolerance;
    if (comparison_->worst_check.empty() || ratio > comparison_->worst_ratio) {
      comparison_->worst_ratio = ratio;
      comparison_->worst_check = "update " + std::to_string(update_ + 1) + ": " + what;
    }
    if (!(diff <= tolerance))
      Fail(what + " differs by " + Number(diff) + " relative (" + figures + ")");
  }

  void Scalar(const char* what, double plan, double reference, double tolerance) {
    if (!std::isfinite(plan) || !std::isfinite(reference)) {
      Fail(std::string(what) + " is not finite (plan " + Number(plan) + ", reference " +
           Number(reference) + ")");
      return;
    }
    Difference(what, Relative(plan, reference), tolerance,
               "plan " + Number(plan) + ", reference " + Number(reference));
  }

  // ||g_plan - g_ref|| / ||g_ref|| for each parameter; the worst one is judged.
  void Gradients(const Tensors& plan, const Tensors& reference, ParityUpdate* u) {
    for (const auto& [name, ref] : reference) {
      if (!plan.contains(name)) {
        Fail("the gradient of " + name + " exists in the reference but not in the plan");
        continue;
      }
      const torch::Tensor& mine = plan.at(name);
      if (!AllFinite(mine) || !AllFinite(ref)) {
        Fail("the gradient of " + name + " is not finite");
        continue;
      }
      const double relative = RelativeNorm(mine, ref);
      if (u->gradient_parameter.empty() || !(relative <= u->gradient_diff)) {
        u->gradient_diff = relative;
        u->gradient_parameter = name;
      }
    }
    for (const auto& [name, mine] : plan) {
      if (!reference.contains(name)) {
        Fail("the gradient of " + name + " exists in the plan but not in the reference");
      }
    }
    if (!u->gradient_parameter.empty()) {
      Difference("the gradient of " + u->gradient_parameter + " before clipping", u->gradient_diff,
                 comparison_->tolerances.gradient);
    }
  }

  // What the optimizer did with the gradient (the parameters after the step less before),
  // judged for each parameter and over all of them together; a parameter stepped on one side
  // only fails whatever its size.
  void Steps(const Tensors& start, const Side& plan, const Side& reference, ParityUpdate* u) {
    double diff_squares = 0, step_squares = 0;
    for (const auto& [name, after] : reference.after) {
      if (!plan.after.contains(name)) continue;  // reported by the gradient comparison
      const torch::Tensor reference_step = after - start.at(name);
      const torch::Tensor plan_step = plan.after.at(name) - start.at(name);
      const double diff = Norm(plan_step - reference_step), step = Norm(reference_step);
      diff_squares += diff * diff;
      step_squares += step * step;
      if ((step == 0) != (Norm(plan_step) == 0)) {
        Fail(name + " was stepped in the " + (step == 0 ? "plan" : "reference") + " only");
        continue;
      }
      const double relative = diff == 0 ? 0 : diff / step;
      if (u->worst_tensor_step_parameter.empty() || !(relative <= u->worst_tensor_step_diff)) {
        u->worst_tensor_step_diff = relative;
        u->worst_tensor_step_parameter = name;
      }
    }
    u->step_diff = diff_squares == 0 ? 0 : std::sqrt(diff_squares / step_squares);
    const ParityTolerances& tol = comparison_->tolerances;
    Difference("the optimizer step over all parameters", u->step_diff, tol.step);
    if (!u->worst_tensor_step_parameter.empty()) {
      Difference("the optimizer step of " + u->worst_tensor_step_parameter,
                 u->worst_tensor_step_diff, tol.tensor_step);
    }
  }

  ParityComparison* comparison_;
  std::vector<std::string>* failures_;
  std::string label_;
  int update_ = 0;
};

// fp16 on the CPU computes in fp32 (there is no CPU fp16 autocast): only its loss scaler runs.
bool ComputesInFp32(Precision precision, bool fp16_computes_in_fp32) {
  return precision == Precision::kFp32 || (precision == Precision::kFp16 && fp16_computes_in_fp32);
}

// Where the check runs: its sides' specs at one shape, and what it is predicted to hold.
struct CheckShape {
  JobSpec reference;
  std::vector<JobSpec> plans;  // the structure run first, where there is one; then as planned
  ParityMemory memory;
};

// The plan's sides: its structure in fp32 first, when it computes in another precision; then
// the plan as planned.
std::vector<JobSpec> PlanSides(const JobSpec& plan, bool fp16_computes_in_fp32) {
  std::vector<JobSpec> sides = {plan};
  if (!ComputesInFp32(plan.plan.precision, fp16_computes_in_fp32)) {
    sides.insert(sides.begin(), plan);
    sides.front().plan.precision = Precision::kFp32;
  }
  return sides;
}

// The check at effective batch `batch` (at most the job's), the plan keeping its structure:
// at least two microbatches when it accumulates, the same checkpointed blocks and precision.
// Its memory is predicted from the reference's ledger there: the sides' updates run one at a
// time, each side holding the same model's state; the reference's update (the whole batch in
// one fp32 microbatch, nothing checkpointed) bounds each plan side's; on a CPU the judge's
// fp32 snapshots share the memory (the parameters the update starts from, and the gradients
// and parameters after it of the reference and of the side being judged: five copies), and
// the limit grows by them: the budget bounds the trainers, as on a GPU, not the judge.
// A plan that keeps its optimizer state on the host leaves the device no room for the
// reference's state: on a CPU the reference then runs in host memory, and the device's peak
// is the plan's sides alone, predicted from their own ledgers at the shape.
Result<CheckShape> ShapeAt(const JobSpec& spec, const Dataset& corpus, int batch) {
  CheckShape shape;
  shape.reference = spec;
  shape.reference.training.effective_batch = batch;
  shape.reference.plan = PlanSpec{batch, 1, {}, Precision::kFp32};
  JobSpec plan = spec;
  if (batch != spec.training.effective_batch) {
    PlanSpec& p = plan.plan;
    plan.training.effective_batch = batch;
    p.microbatch = std::min(p.microbatch, p.accumulation_steps > 1 ? (batch + 1) / 2 : batch);
    p.accumulation_steps = AccumulationSteps(batch, p.microbatch);
  }
  const bool on_cpu = spec.runtime.device != "cuda";
  shape.plans = PlanSides(plan, /*fp16_computes_in_fp32=*/on_cpu);
  Result<MemoryLedger> ledger = MeasureLedger(shape.reference, corpus);
  if (!ledger.ok()) return ledger.status();
  ParityMemory& m = shape.memory;
  m.usable_bytes = spec.memory.usable_bytes();
  const auto sides = static_cast<std::int64_t>(shape.plans.size());
  const std::int64_t full =
      ledger->parameters_bytes + ledger->gradients_bytes + ledger->optimizer_state_bytes;
  // A side whose plan keeps the optimizer state on the host holds the rest on the device.
  const bool host_plan = plan.plan.optimizer_state == StatePlacement::kHost;
  const std::int64_t side_state = host_plan ? full - ledger->optimizer_state_bytes : full;
  // Copies of the parameters the optimizer steps (a frozen base never changes).
  m.snapshot_bytes = 5 * (ledger->parameters_bytes - ledger->frozen_parameters_bytes);
  const std::int64_t shared = on_cpu ? m.snapshot_bytes : 0;
  m.limit_bytes = m.usable_bytes + shared;
  // Only where the CPU simulates an accelerator is its host memory outside the limit.
  m.reference_on_host = host_plan && spec.memory.simulated_device;
  if (m.reference_on_host) {
    std::int64_t side_peak = 0;
    for (const JobSpec& side : shape.plans) {
      Result<MemoryLedger> own = MeasureLedger(side, corpus);
      if (!own.ok()) return own.status();
      side_peak = std::max(side_peak, own->peak_bytes);
    }
    m.trainers = static_cast<int>(sides);
    m.model_state_bytes = side_state;
    m.predicted_peak_bytes = side_peak + (sides - 1) * side_state + shared;
  } else {
    m.trainers = static_cast<int>(sides) + 1;
    m.model_state_bytes = full;
    m.predicted_peak_bytes = ledger->peak_bytes + sides * side_state + shared;
  }
  return shape;
}

// The fewest samples the check halves its batch down to: one, two when the plan accumulates
// (so that it still does).
int FewestCheckSamples(const JobSpec& spec) { return spec.plan.accumulation_steps > 1 ? 2 : 1; }

// The largest shape, from the job's effective batch down by halves, whose whole check is
// predicted to fit its limit; the smallest when none is. `why` is what made the job's shape
// too large.
Result<CheckShape> ShapeThatFits(const JobSpec& spec, const Dataset& corpus, std::string* why) {
  const int smallest = FewestCheckSamples(spec);
  for (int batch = spec.training.effective_batch;; batch /= 2) {
    Result<CheckShape> shape = ShapeAt(spec, corpus, batch);
    if (!shape.ok() || shape->memory.predicted_peak_bytes <= shape->memory.limit_bytes ||
        batch / 2 < smallest) {
      return shape;
    }
    if (why->empty()) {
      *why = "the whole check at effective batch " + std::to_string(batch) + " (" +
             std::to_string(shape->memory.trainers) + " trainers) is predicted at " +
             FormatBytes(shape->memory.predicted_peak_bytes) + ", more than its limit of " +
             FormatBytes(shape->memory.limit_bytes);
    }
  }
}

// The report of a check at `shape`, before it runs: the plan as checked, what was reduced
// and why, the comparisons it will fill and its predicted memory.
ParityReport NewReport(const JobSpec& spec, const CheckShape& shape, const std::string& why) {
  ParityReport report;
  report.plan = spec.plan;
  report.checked_plan = shape.plans.back().plan;
  report.checked_effective_batch = shape.reference.training.effective_batch;
  if (report.checked_effective_batch != spec.training.effective_batch) {
    report.reduction = {
        {"effective_batch", {spec.training.effective_batch, report.checked_effective_batch}},
        {"microbatch", {spec.plan.microbatch, report.checked_plan.microbatch}},
        {"accumulation_steps",
         {spec.plan.accumulation_steps, report.checked_plan.accumulation_steps}},
        {"why", why}};
  }
  const bool fp16_computes_in_fp32 = spec.runtime.device != "cuda";
  for (const JobSpec& side : shape.plans) {
    ParityComparison comparison;
    comparison.judges = &side == &shape.plans.back() ? "as planned" : "structure";
    comparison.precision = side.plan.precision;
    comparison.tolerances = ToleranceFor(side.plan.precision, fp16_computes_in_fp32);
    report.comparisons.push_back(std::move(comparison));
  }
  report.memory = shape.memory;
  return report;
}

// Why the check cannot run within its limit at its smallest shape.
std::string DoesNotFit(const CheckShape& shape) {
  const ParityMemory& m = shape.memory;
  const bool on_cpu = shape.reference.runtime.device != "cuda";
  return "the parity check does not fit the usable memory (" + FormatBytes(m.usable_bytes) +
         (on_cpu ? ", plus the judge's snapshots: " + FormatBytes(m.snapshot_bytes) : "") +
         ") even at effective batch " + std::to_string(shape.reference.training.effective_batch) +
         ": it is predicted at " + FormatBytes(m.predicted_peak_bytes) + ", its " +
         std::to_string(m.trainers) + " trainers each holding the model's state (" +
         FormatBytes(m.model_state_bytes) + (m.reference_on_host ? " on the device" : "") +
         ") beside one update at a time" +
         (m.reference_on_host ? ", the reference in host memory" : "") +
         ". Raise memory.budget, or set parity.updates: 0 to train unchecked";
}

// Runs the check at `shape` under its limit, filling `report`'s comparisons,
// failures, verdict and measured peak. OutOfMemory when it ran out.
Status RunCheck(const CheckShape& shape, const Dataset& corpus, int updates, TrainingFault fault,
                ParityReport* report) {
  DeviceMemory& memory = MemoryOf(
      torch::Device(shape.reference.runtime.device == "cuda" ? torch::kCUDA : torch::kCPU));
  const ScopedMemoryLimit limited(memory, shape.memory.limit_bytes);
  memory.ResetPeak();
  NullEventSink discard;
  const OutOfMemoryWatch out_of_memory;
  try {
    std::vector<std::unique_ptr<Side>> plans;
    std::vector<Judge> judges;
    for (std::size_t i = 0; i < shape.plans.size(); ++i) {
      plans.push_back(std::make_unique<Side>(shape.plans[i], corpus, &discard));
      plans.back()->trainer.set_test_only_fault(fault);
      judges.emplace_back(&report->comparisons[i], &report->failures);
    }
    const std::unique_ptr<Side> reference_side =
        MakeReference(shape.reference, corpus, &discard, shape.memory.reference_on_host);
    Side& reference = *reference_side;
    report->own_dropout_switched_off = plans.back()->own_dropout_switched_off;
    Side& as_planned = *plans.back();
    Tensors start = Snapshot(NamedTrainableParameters(reference.trainer.model()));
    int stepped = 0, skipped_in_a_row = 0;
    for (int update = 0; stepped < updates; ++update) {
      // Each update is judged from the same parameters: AdamW's first steps normalise each
      // element, so a gradient element within rounding of zero takes a visibly different step
      // on each side (seen: 0.4% of position_embedding's step at update 1), and left alone that
      // would compound into later gradients beyond their tolerance. The optimizer's state and
      // the schedule stay each side's own, so a fault of either still shows.
      for (const std::unique_ptr<Side>& plan : plans) plan->StartFrom(start);
      // The plan as planned first: when its fp16 loss scaler skips the update (an overflow),
      // the other sides replay the skip, so that no side's optimizer state runs a step ahead,
      // and the check runs one update longer: `updates` updates are judged with their step.
      // Each side is judged as soon as the reference has run, and its snapshots freed.
      const UpdateStats p = as_planned.Update(update, false);
      const bool skip = p.skipped;
      const UpdateStats r = reference.Update(update, skip);
      judges.back().CompareUpdate(update, start, as_planned, reference, p, r);
      as_planned.Forget();
      bool finite = std::isfinite(r.loss) && std::isfinite(p.loss);
      for (std::size_t i = 0; i + 1 < plans.size(); ++i) {
        const UpdateStats structure = plans[i]->Update(update, skip);
        judges[i].CompareUpdate(update, start, *plans[i], reference, structure, r);
        plans[i]->Forget();
        finite = finite && std::isfinite(structure.loss);
      }
      start = std::move(reference.after);
      reference.Forget();
      if (!finite) break;  // nothing left to compare
      skipped_in_a_row = skip ? skipped_in_a_row + 1 : 0;
      stepped += skip ? 0 : 1;
      if (const std::optional<std::string> diverged =
              as_planned.trainer.TooManySkipsInARow(skipped_in_a_row, update)) {
        judges.back().Fail(*diverged);
        break;
      }
    }
  } catch (const std::exception& e) {
    // An OOM (trainer-run exits 4, and the daemon falls back as for one), not an internal
    // error the daemon would record as a crash.
    return out_of_memory.StatusOf(e, "the parity check failed: " + ModelErrorReason(e));
  }
  report->memory.measured_peak_bytes = memory.peak_bytes();
  report->pass = report->failures.empty();
  return Status::Ok();
}

}  // namespace

ParityTolerances ToleranceFor(Precision precision, bool fp16_computes_in_fp32) {
  if (ComputesInFp32(precision, fp16_computes_in_fp32)) {
    return {1e-5, 1e-12, 1e-5, 1e-4, 1e-3, 1e-2};
  }
  // The structure was judged in fp32: these bound rounding alone. A tensor's AdamW step can
  // flip the sign of every element (a difference of 2); past that it is no rounding.
  return {2e-3, 1e-12, 0.25, 0.5, 0.5, 2.0};
}

Result<std::optional<std::string>> WhyParityCannotFit(const JobSpec& spec, const Dataset& corpus) {
  int batch = spec.training.effective_batch;
  while (batch / 2 >= FewestCheckSamples(spec)) batch /= 2;
  Result<CheckShape> shape = ShapeAt(spec, corpus, batch);
  if (!shape.ok()) return shape.status();
  if (shape->memory.predicted_peak_bytes <= shape->memory.limit_bytes) {
    return std::optional<std::string>();
  }
  return std::optional<std::string>(DoesNotFit(*shape));
}

Result<ParityReport> CheckParity(const JobSpec& spec, const Dataset& corpus, int updates,
                                 TrainingFault fault) {
  std::string why;  // what reduced the shape, when something did
  Result<CheckShape> shape = ShapeThatFits(spec, corpus, &why);
  if (!shape.ok()) return shape.status();
  if (shape->memory.predicted_peak_bytes > shape->memory.limit_bytes) {
    return Status::OutOfMemory(DoesNotFit(*shape));
  }
  ParityReport report = NewReport(spec, *shape, why);
  const Status run = RunCheck(*shape, corpus, updates, fault, &report);
  if (!run.ok()) return run;
  return report;
}

}  // namespace trainerd
