// The release check of a plan: a short run of the plan against the reference execution of
// the same job (no checkpointing, the real large batch, fp32) on the same data and seed. Every
// update starts both sides from the reference's parameters (each keeps its own optimizer
// state and schedule) and compares what a bug in accumulation, clipping, scheduling or
// checkpointing would change, before anything can hide it:
//   - the loss of the update;
//   - the learning rate the update stepped with;
//   - the global gradient norm BEFORE clipping (after fp16 unscaling);
//   - every parameter's accumulated gradient before clipping: ||g_plan - g_ref|| / ||g_ref||;
//   - the optimizer's step (parameters after it less parameters before), over all
//     parameters: ||step_plan - step_ref|| / ||step_ref||.
// A gradient or parameter missing, NaN or inf on either side fails, as does an fp16 overflow
// skip on one side only. Tolerances depend on the plan's precision (docs/trainer-run.md,
// "Parity", gives the measured distributions behind them).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "trainerd/common/status.h"
#include "trainerd/trainer/data/dataset.h"
#include "trainerd/trainer/semantics/training_fault.h"
#include "trainerd/trainer/spec/job_spec.h"

namespace trainerd {

// Relative differences allowed, each at every update of the run.
struct ParityTolerances {
  double loss = 0;
  double learning_rate = 0;
  double grad_norm = 0;
  double gradient = 0;  // worst parameter
  double step = 0;      // all parameters together
};

// fp32 (and fp16 on the CPU, which computes in fp32) to rounding; bf16 within its precision.
ParityTolerances ToleranceFor(Precision precision, bool fp16_computes_in_fp32);

// The largest differences of one update of the run.
struct ParityUpdate {
  double plan_loss = 0, reference_loss = 0;
  double plan_lr = 0, reference_lr = 0;
  double plan_grad_norm = 0, reference_grad_norm = 0;
  bool plan_skipped = false, reference_skipped = false;
  double gradient_diff = 0;  // worst parameter's relative gradient difference
  std::string gradient_parameter;
  double step_diff = 0;               // the optimizer step, all parameters together
  double worst_tensor_step_diff = 0;  // the tensor whose step differs most (diagnosis only)
  std::string parameter_name;
};

struct ParityReport {
  bool pass = false;
  std::vector<std::string> failures;  // one sentence per check that failed, in order
  ParityTolerances tolerances;
  std::vector<ParityUpdate> updates;
  PlanSpec checked_plan;  // the plan as run: the job's, or its reduction (see `reduction`)
  int checked_effective_batch = 0;
  // Empty when the real shape ran; else what was reduced, from the job's value to the
  // checked one: {"effective_batch": [64, 16], "microbatch": [16, 8], ...}.
  nlohmann::json reduction = nlohmann::json::object();
  // Dropout modules of a TorchScript model, switched off on both sides: their masks come from
  // the default generator and would differ with the split (the trainer's own dropout is
  // split-invariant and stays on).
  int own_dropout_switched_off = 0;
  nlohmann::json ToJson(const PlanSpec& plan) const;
};

// Runs `updates` updates of `spec` with its plan and with the reference. When the reference's
// measured peak exceeds the job's usable memory, both run at a reduced shape: the effective
// batch halved until the reference fits, the plan keeping its structure (at least two
// microbatches when it accumulates, the same checkpointed blocks, the same precision).
// `fault` (TEST ONLY) is committed by the plan's trainer.
Result<ParityReport> CheckParity(const JobSpec& spec, const Dataset& corpus, int updates,
                                 TrainingFault fault = TrainingFault::kNone);

}  // namespace trainerd
