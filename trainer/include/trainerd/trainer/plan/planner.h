// The planner: picks the plan (microbatch, checkpointed blocks, precision) that fits the
// device's usable memory and finishes the job soonest, from measurements.
//
// 1. Probe, per allowed precision: a single microbatch at each probe microbatch size, timed
//    as in 3., with no blocks and with every block checkpointed; peak bytes are fitted as a
//    linear function of the microbatch, and the forward and backward's time as straight
//    segments through the sizes (SegmentFit); the optimizer step is timed apart (an update of
//    four of the smallest probe microbatches against one), so that an update of k
//    microbatches costs k forwards and backwards and one step. A per-block ledger orders the blocks
//    for checkpointing (checkpoint_ladder.h), and picks the output chunk: where a next-token
//    model's output layer keeps more for the backward than its largest block, every plan
//    (the probes' too) takes its loss in chunks of as many positions as keep about what that
//    block keeps for one sample (a power of two; plan output_chunk, output_chunks.h).
// 2. Predict peak and update time for every (microbatch 1..effective batch, the first k
//    blocks of the ladder checkpointed, precision); keep those predicted to fit usable memory
//    (and, when the plan is to be checked for parity, whose check fits); order by predicted
//    job duration, then by less memory. A plan predicted over usable has twins that may fit:
//    the optimizer state on the host, sharded over the ranks, or (one microbatch per update)
//    the optimizer step inside the backward, which frees the gradients and, with clipping,
//    costs a second forward and backward (plan step_in_backward, in_backward_model_state.h);
//    and, where the host is not the device, the activations of the blocks not checkpointed
//    in host memory (plan offload_activations, activation_offload.h): their peak is
//    predicted from a probe of the lever (its peak and the bytes its backward restores), its
//    time from the same probe's seconds per byte moved, so the copies are weighed against
//    the recompute of checkpointing; a twin whose activations exceed the host budget is
//    rejected with the reason.
// 3. Screen: per precision and accumulation step count, the candidate predicted fastest is
//    timed under the device limit (after a warm-up update, the fastest of as many updates as
//    make 0.5 s, at least 2, at most 5), in predicted order, while the search budget (2% of the
//    window) lasts; a plan that OOMs or measures above usable is rejected. The probes' small
//    microbatches only order the screening: the time model cannot see kernels that grow more
//    efficient with size.
// 4. Rounds: the screened plans within 30% of the fastest (at most four) are timed four more
//    times in turn, interleaved; the choice is the fastest median, and plans within the
//    measured noise of it (at most 3%) are tied and broken by preference: an even split,
//    fewer accumulation steps, fewer checkpointed blocks (plan_selection.h).
// The named baseline (microbatch 1, every block checkpointed, fp32) is the last resort, then
// the same with the optimizer state on the host, then (one microbatch per update) stepped
// inside the backward; when even those do not fit the result is OutOfMemory.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "trainerd/common/status.h"
#include "trainerd/trainer/data/dataset.h"
#include "trainerd/trainer/plan/plan_selection.h"
#include "trainerd/trainer/spec/job_spec.h"

namespace trainerd {

// Microbatch 1, every block checkpointed, fp32, with the output chunk of `spec`'s plan; for a
// BatchNorm model whose job does not allow accumulation
// (training.allow_batch_norm_accumulation), the whole effective batch at once.
PlanSpec NamedBaselinePlan(const JobSpec& spec);

struct PlanOptions {
  // The plan is checked for parity before it trains (trainer-run --parity, as the daemon
  // does): plans whose check cannot fit the device even at its smallest shape are rejected
  // with its reason (a bf16 plan's check holds one more copy of the model's state than an
  // fp32 plan's).
  bool parity_checked = false;
};

Result<ChosenPlan> PlanJob(const JobSpec& spec, const Dataset& corpus,
                           const PlanOptions& options = {});

// A plan the planner weighed, with what its probes predict.
struct PredictedPlan {
  PlanSpec plan;
  std::int64_t peak_bytes = 0;
  double update_seconds = 0;
  std::string rejection;  // why it is no candidate on prediction alone; empty for a candidate
};

// Steps 1 and 2 of PlanJob alone (probe, predict): every plan it weighs, the candidates first,
// fastest predicted first. What bench/time_model_bench.cc holds the time model to.
Result<std::vector<PredictedPlan>> PredictPlans(const JobSpec& spec, const Dataset& corpus,
                                                const PlanOptions& options = {});

// What ChosenPlan::rejected lists: of the plans that were timed and lost and those the time
// model predicted faster than `chosen` (its modelled_duration_seconds, the same model's
// figure), the ten predicted fastest. The chosen plan's measured job time is no measure for
// them: the time model was off by ChosenPlan::TimeModelError() (+58% on the bundled job once),
// and against the measured time the plans the budget ruled out would drop off the plan card.
// When the chosen plan is the last resort, which the time model has no figure for
// (modelled_duration_seconds 0), every refused plan is listed (the ten predicted fastest): none
// of the plans the job allowed was taken, and the card says why.
std::vector<RejectedPlan> FasterAlternatives(const std::vector<RejectedPlan>& rejected,
                                             const ChosenPlan& chosen);

// Fits y = intercept + slope * x by least squares (one point: slope 0).
struct LinearFit {
  double intercept = 0;
  double slope = 0;
  double At(double x) const { return intercept + slope * x; }
};
LinearFit FitLine(const std::vector<double>& x, const std::vector<double>& y);

// y through measured points (x > 0): straight segments between them; beyond the last point
// the last segment goes on (never downwards), below the first y is proportional to x (one
// point: proportional everywhere). Of points at the same x the first counts. How an update's
// time grows with its microbatch: a line through the probes would miss the kernels that grow
// more efficient with size.
class SegmentFit {
 public:
  SegmentFit() = default;
  SegmentFit(const std::vector<double>& x, const std::vector<double>& y);
  double At(double x) const;

 private:
  std::vector<double> x_, y_;  // ascending x
};

// The time model of one precision, from the probes: an update costs the forward and backward
// of each of its microbatches and one optimizer step (its clip and AdamW), whatever its
// accumulation.
struct UpdateTimeModel {
  // One microbatch's forward and backward by its size, nothing and every block checkpointed.
  SegmentFit none, all;
  double step_seconds = 0;
  // The ledger's forward through every block per sample: what recomputing them all adds at
  // least.
  double recompute_seconds_per_sample = 0;

  // A microbatch of `m` with blocks checkpointed whose share of the blocks' recompute cost is
  // `checkpointed_cost_fraction` (0: none, 1: all).
  double MicrobatchSeconds(int m, double checkpointed_cost_fraction) const;
  // An update of `effective_batch` samples in microbatches of `m`, the last one short where
  // `m` does not divide it.
  double UpdateSeconds(int effective_batch, int m, double checkpointed_cost_fraction) const;
};

}  // namespace trainerd
