// The memory ledger: bytes by category for one job spec at its plan and target shape,
// measured on the device through DeviceMemory, not estimated.
//   parameters, gradients, optimizer_state  exact, summed from the tensors
//   inputs          the update's microbatch input and target tensors
//   activations     live bytes after one microbatch's forward and loss minus before it
//   temporaries     the measured peak minus everything above (the buffers the peak sits on)
//   blocks          per block: bytes one forward through it leaves alive, uncheckpointed and
//                   checkpointed, and its forward time (what recomputing it costs)
// The categories sum to the measured peak.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "trainerd/common/status.h"
#include "trainerd/trainer/data/dataset.h"
#include "trainerd/trainer/spec/job_spec.h"

namespace trainerd {

struct BlockActivation {
  int index = 0;
  std::int64_t activation_bytes = 0;
  std::int64_t checkpointed_activation_bytes = 0;
  double forward_seconds = 0;
};

struct MemoryLedger {
  std::int64_t parameters_bytes = 0;
  std::int64_t gradients_bytes = 0;
  std::int64_t optimizer_state_bytes = 0;
  std::int64_t activations_bytes = 0;
  std::int64_t temporaries_bytes = 0;
  std::int64_t inputs_bytes = 0;
  std::int64_t peak_bytes = 0;
  std::int64_t reserved_peak_bytes = 0;  // the allocator's peak holding (CUDA cache); = peak on CPU
  std::int64_t budget_bytes = 0;
  std::int64_t usable_bytes = 0;
  std::vector<BlockActivation> blocks;
  std::string blocks_note;  // why there are no blocks a plan can checkpoint; "" when there are
  PlanSpec plan;
  std::string method;

  nlohmann::json ToJson() const;
  // Categories sorted largest first, then peak against usable and budget, then blocks.
  std::string ToTable() const;
};

// Two real updates of `spec` (the first creates gradients and optimizer state, the second is
// measured) plus one forward per checkpointing mode for the blocks. Runs with the device
// limit lifted, so a plan that needs more than the budget is reported rather than hit.
Result<MemoryLedger> MeasureLedger(const JobSpec& spec, const Dataset& corpus);

}  // namespace trainerd
