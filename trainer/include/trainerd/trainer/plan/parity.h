// The release check of a plan: a short run of the plan against the reference execution of
// the same job (no checkpointing, the real large batch, fp32) on the same data and seed. Every
// update starts both sides from the reference's parameters (each keeps its own optimizer
// state and schedule) and compares what a bug in accumulation, clipping, scheduling, weight
// decay or checkpointing would change, before anything can hide it:
//   - the loss of the update;
//   - the learning rate the update stepped with;
//   - the global gradient norm BEFORE clipping (after fp16 unscaling);
//   - every parameter's accumulated gradient before clipping: ||g_plan - g_ref|| / ||g_ref||;
//   - the optimizer's step (parameters after it less parameters before), for each parameter
//     and over all parameters: ||step_plan - step_ref|| / ||step_ref||.
// A gradient or parameter missing, NaN or inf on either side fails, as does a parameter
// stepped on one side only. An update the plan's fp16 loss scaler skips (an overflow) is
// replayed by the other sides, which compute it without stepping; the check then runs one
// update longer, so that `updates` updates are judged with their step, and fails when the
// plan skips 24 in a row, as a run stops there.
// Structure is judged apart from rounding: a plan that computes in bf16 (or fp16 on CUDA) is
// also run with its microbatches, accumulation and checkpointing in fp32 and held to fp32's
// tolerances, then run as planned and held to its precision's (docs/trainer-run.md, "Parity
// check", gives the measured differences behind them). The report's type is the worker
// protocol's (spec/worker_protocol.h).
#pragma once
#include <optional>
#include <string>

#include "trainerd/common/status.h"
#include "trainerd/trainer/data/dataset.h"
#include "trainerd/trainer/semantics/training_fault.h"
#include "trainerd/trainer/spec/job_spec.h"
#include "trainerd/trainer/spec/worker_protocol.h"

namespace trainerd {

// fp32 (and fp16 on the CPU, which computes in fp32) to rounding; bf16 (and fp16 on CUDA)
// within its rounding, each tensor's step only to a sign flip of its elements.
ParityTolerances ToleranceFor(Precision precision, bool fp16_computes_in_fp32);

// Runs `updates` updates (plus the plan's fp16 skips) of `spec` with its plan and with the
// reference. The whole check is fitted to the job's usable memory and runs under it as a
// limit: its trainers (two, three with a structure run) each hold the model's state, their
// updates run one at a time, and on a CPU the judge's snapshots share the memory. Predicted
// from the reference's ledger, the check runs at the job's shape or, when that would not fit,
// at the effective batch halved until it does, the plan keeping its structure (at least two
// microbatches when it accumulates, the same checkpointed blocks, the same precision).
// OutOfMemory, before any side is built, when even the smallest shape does not fit; and when
// the check runs out regardless.
// `fault` (TEST ONLY) is committed by the plan's trainers.
Result<ParityReport> CheckParity(const JobSpec& spec, const Dataset& corpus, int updates,
                                 TrainingFault fault = TrainingFault::kNone);

// Why the parity check of `spec`'s plan cannot run on this device at any shape (its smallest
// shape predicted over its limit, as CheckParity predicts it, in CheckParity's words), or
// nullopt when it can. Its memory depends on the plan's precision (the number of trainers) and
// on whether it accumulates (the smallest shape), not on its microbatch or checkpointing.
Result<std::optional<std::string>> WhyParityCannotFit(const JobSpec& spec, const Dataset& corpus);

}  // namespace trainerd
