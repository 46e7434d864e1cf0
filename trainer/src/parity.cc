#include "trainerd/trainer/parity.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>

#include "trainerd/trainer/memory_ledger.h"
#include "trainerd/trainer/trainer.h"

namespace trainerd {
namespace {}  // namespace

ParityTolerances ToleranceFor(Precision precision) {
  switch (precision) {
    case Precision::kFp32:
      return {1e-5, 1e-4};
    case Precision::kBf16:
      return {5e-3, 1e-2};
    case Precision::kFp16:
      return {5e-3, 1e-2};
  }
  return {};
}

nlohmann::json ParityReport::ToJson(const PlanSpec& plan) const {
  return {
      {"pass", pass},
      {"max_grad_diff", max_grad_diff},
      {"max_grad_parameter", max_grad_parameter},
      {"max_loss_diff", max_loss_diff},
      {"tolerances",
       {{"max_grad_diff", tolerances.max_grad_diff}, {"max_loss_diff", tolerances.max_loss_diff}}},
      {"updates", updates},
      {"plan", trainerd::ToJson(plan)},
      {"plan_losses", plan_losses},
      {"reference_losses", reference_losses},
      {"reference_shape", reference_shape}};
}

Result<ParityReport> CheckParity(const JobSpec& spec, const TextCorpus& corpus, int updates) {
  // The reference runs the real large batch. When that needs more than the usable memory,
  // both runs use a reduced shape: the effective batch is halved until the reference fits.
  JobSpec plan_spec = spec;
  JobSpec reference_spec = spec;
  bool reduced = false;
  for (;;) {
    reference_spec.plan =
        PlanSpec{reference_spec.training.effective_batch, 1, {}, Precision::kFp32};
    Result<MemoryLedger> ledger = MeasureLedger(reference_spec, corpus);
    if (!ledger.ok()) return ledger.status();
    if (ledger->peak_bytes <= spec.memory.usable_bytes() ||
        reference_spec.training.effective_batch == 1) {
      break;
    }
    reference_spec.training.effective_batch /= 2;
    reduced = true;
  }
  if (reduced) {
    const int batch = reference_spec.training.effective_batch;
    plan_spec.training.effective_batch = batch;
    plan_spec.plan.microbatch = std::min(plan_spec.plan.microbatch, batch);
    plan_spec.plan.accumulation_steps =
        (batch + plan_spec.plan.microbatch - 1) / plan_spec.plan.microbatch;
  }
  NullEventSink discard;
  ParityReport report;
  report.updates = updates;
  report.tolerances = ToleranceFor(spec.plan.precision);
  report.reference_shape = {{"effective_batch", reference_spec.training.effective_batch},
                            {"block_size", spec.model.gpt.block_size},
                            {"blocks", NumBlocks(spec.model)},
                            {"reduced", reduced}};
  try {
    Trainer plan(plan_spec, corpus, &discard);
    Trainer reference(reference_spec, corpus, &discard);
    for (int update = 0; update < updates; ++update) {
      report.plan_losses.push_back(plan.TrainUpdate(update).loss);
      report.reference_losses.push_back(reference.TrainUpdate(update).loss);
      if (update == 0) {
        // Gradients of update 1 are still in .grad (zeroed at the start of the next update).
        auto expected = reference.model().named_parameters();
        for (const auto& item : plan.model().named_parameters()) {
          const torch::Tensor& reference_grad = expected[item.key()].grad();
          const torch::Tensor& plan_grad = item.value().grad();
          if (!reference_grad.defined() || !plan_grad.defined()) continue;
          const double diff = (plan_grad - reference_grad).abs().max().item<double>();
          if (diff >= report.max_grad_diff) {
            report.max_grad_diff = diff;
            report.max_grad_parameter = item.key();
          }
        }
      }
      report.max_loss_diff =
          std::max(report.max_loss_diff,
                   std::fabs(report.plan_losses.back() - report.reference_losses.back()));
    }
  } catch (const c10::Error& e) {
    return Status::Internal(std::string("parity run: ") + e.what_without_backtrace());
  }
  report.pass = std::isfinite(report.max_loss_diff) &&
                report.max_grad_diff <= report.tolerances.max_grad_diff &&
                report.max_loss_diff <= report.tolerances.max_loss_diff;
  return report;
}

}  // namespace trainerd
