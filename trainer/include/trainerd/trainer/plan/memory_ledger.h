// The memory ledger (spec/worker_protocol.h: MemoryLedger): bytes by category for one job spec
// at its plan and target shape, measured on the device through DeviceMemory, not estimated.
#pragma once

#include <string>

#include "trainerd/common/status.h"
#include "trainerd/trainer/data/dataset.h"
#include "trainerd/trainer/semantics/training_fault.h"
#include "trainerd/trainer/spec/job_spec.h"
#include "trainerd/trainer/spec/worker_protocol.h"

namespace trainerd {

// Categories sorted largest first, then peak against usable and budget, then blocks: the
// ledger as trainer-run prints it on a terminal.
std::string LedgerTable(const MemoryLedger& ledger);

// The planner's output chunk (PlanSpec::output_chunk) for the plan of `ledger`, measured or on
// paper with the whole output layer: where the output layer keeps more for the backward than
// the largest block does (the largest category first), chunks of as many positions as keep
// about what that block keeps for one sample, a power of two below `positions_per_sample`; 0
// (all at once) where it keeps no more.
int OutputChunkFor(const MemoryLedger& ledger, int positions_per_sample);

// Real updates of `spec`: until one steps (it creates gradients and optimizer state; fp16
// may skip the first ones for overflow), then one measured; plus one forward per
// checkpointing mode for the blocks. Runs with the device limit lifted, so a plan that needs
// more than the budget is reported rather than hit. `fault`: TEST ONLY (training_fault.h).
Result<MemoryLedger> MeasureLedger(const JobSpec& spec, const Dataset& corpus,
                                   TrainingFault fault = TrainingFault::kNone);

}  // namespace trainerd
