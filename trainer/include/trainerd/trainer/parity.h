// The release check of a plan: a short run of the plan against the reference execution of
// the same job (no checkpointing, the real large batch, fp32) on the same data and seed.
// Reports the largest gradient difference after the first update and the largest
// loss-curve difference, with a verdict against tolerances that depend on the plan's
// precision (bf16/fp16 round activations, so they cannot match fp32 to 1e-6).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "trainerd/common/status.h"
#include "trainerd/trainer/job_spec.h"
#include "trainerd/trainer/text_corpus.h"

namespace trainerd {

struct ParityTolerances {
  double max_grad_diff = 0;  // absolute, any parameter element, after update 1
  double max_loss_diff = 0;  // absolute, any update of the short run
};

// fp32 plans must match to rounding; bf16 and fp16 within their precision.
ParityTolerances ToleranceFor(Precision precision);

struct ParityReport {
  bool pass = false;
  double max_grad_diff = 0;
  std::string max_grad_parameter;  // where the largest difference is
  double max_loss_diff = 0;
  ParityTolerances tolerances;
  int updates = 0;
  std::vector<double> plan_losses;
  std::vector<double> reference_losses;
  nlohmann::json reference_shape;  // the shape both runs used: effective_batch, block_size,
                                   // blocks, reduced
  nlohmann::json ToJson(const PlanSpec& plan) const;
};

// Runs `updates` updates of `spec` with its plan and with the reference plan. When the
// reference's measured peak exceeds the job's usable memory, both run at a reduced shape:
// the effective batch halved until the reference fits (`reference_shape.reduced`).
Result<ParityReport> CheckParity(const JobSpec& spec, const TextCorpus& corpus, int updates);

}  // namespace trainerd
