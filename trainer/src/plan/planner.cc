#include "trainerd/trainer/plan/planner.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <tuple>

#include "plan/checkpoint_ladder.h"
#include "trainerd/trainer/device/device_memory.h"
#include "trainerd/trainer/device/device_timer.h"
#include "trainerd/trainer/distributed/state_sharding.h"
#include "trainerd/trainer/loop/host_model_state.h"
#include "trainerd/trainer/loop/trainer.h"
#include "trainerd/trainer/models/build_model.h"
#include "trainerd/trainer/plan/memory_ledger.h"
#include "trainerd/trainer/plan/parity.h"
#include "trainerd/trainer/plan/plan_selection.h"
#include "trainerd/trainer/spec/accumulation_steps.h"
#include "trainerd/trainer/spec/plan_text.h"
#include "trainerd/trainer/spec/units.h"

namespace trainerd {
namespace {

using Clock = std::chrono::steady_clock;

// With the output chunk `spec`'s plan has (PlanJob sets the one the ledger calls for).
PlanSpec MakePlan(const JobSpec& spec, int microbatch, std::vector<int> blocks, Precision precision,
                  StatePlacement optimizer_state = StatePlacement::kDevice) {
  PlanSpec plan{microbatch, AccumulationSteps(spec.training.effective_batch, microbatch),
                std::move(blocks), precision, optimizer_state};
  plan.output_chunk = spec.plan.output_chunk;
  return plan;
}

struct Measurement {
  std::int64_t peak_bytes = 0;
  double update_seconds = 0;
  bool oom = false;
  bool never_stepped = false;  // an fp16 loss scaler skipped every warm-up update
  bool timed() const { return !oom && !never_stepped; }
};

// Timed updates of one measurement last at least this long together (at least
// kMinTimedUpdates, at most kMaxTimedUpdates of them): one update of a small job is a tenth of
// a second, where the machine's noise is of the order of the update itself; and the first
// update after the warm-up is often the slowest (on the AMD EPYC the bundled job's 32 x 1 took
// 0.51 s there, 0.41 s after).
constexpr double kMinTimedSeconds = 0.5;
constexpr int kMinTimedUpdates = 2;
constexpr int kMaxTimedUpdates = 5;

// The fastest of real optimizer updates of `plan` (after warm-up until one steps, whose time
// decides how many) under `limit` bytes, and their peak with an evaluation's. The fastest, not
// the median: on a shared machine interference only ever slows an update down. `effective_batch`
// overrides the job's, so the probe can time a single microbatch.
Measurement MeasureUpdate(const JobSpec& spec, const Dataset& corpus, const PlanSpec& plan,
                          int effective_batch, std::int64_t limit) {
  JobSpec job = spec;
  job.plan = plan;
  job.plan.accumulation_steps = AccumulationSteps(effective_batch, plan.microbatch);
  job.training.effective_batch = effective_batch;
  Measurement m;
  NullEventSink discard;
  const OutOfMemoryWatch out_of_memory;
  try {
    Trainer trainer(job, corpus, &discard);
    DeviceMemory& memory = MemoryOf(trainer.device());
    // One process holds all of a sharded plan's state: what the other ranks would keep is
    // left out of its limit and peak.
    const std::int64_t other_ranks =
        plan.zero_stage > 0 ? OptimizerStateOnOtherRanks(TrainableParameters(trainer.model()),
                                                         job.distributed.job_ranks)
                            : 0;
    ScopedMemoryLimit limited(memory, limit > 0 ? limit + other_ranks : 0);
    DeviceTimer timer(trainer.device());
    // Warm-up until an update steps: the optimizer state is in every timed update's peak.
    const std::optional<int> stepped = trainer.TrainUntilStepped(0);
    if (!stepped) {
      m.never_stepped = true;
      return m;
    }
    const int first = *stepped;
    const double warm_up = timer.Seconds() / first;
    const int timed = std::clamp(static_cast<int>(std::ceil(kMinTimedSeconds / warm_up)),
                                 kMinTimedUpdates, kMaxTimedUpdates);
    memory.ResetPeak();
    m.update_seconds = std::numeric_limits<double>::infinity();
    for (int update = first; update < first + timed; ++update) {
      timer.Restart();
      trainer.TrainUpdate(update);
      m.update_seconds = std::min(m.update_seconds, timer.Seconds());
    }
    trainer.Evaluate();  // in the plan's microbatches: a plan whose evaluation OOMs fails here
    m.peak_bytes = memory.peak_bytes() - other_ranks;
  } catch (const std::exception& e) {
    if (!out_of_memory.IsOutOfMemory(e)) throw;
    m.oom = true;
  }
  return m;
}

// Peak of one microbatch as a linear function of its size, and the time of its forward and
// backward through the probe sizes, with no blocks and with every block checkpointed; and the
// time of an update's optimizer step (its clip, its AdamW step), once per update whatever the
// accumulation.
struct PrecisionModel {
  Precision precision;
  LinearFit peak_none, peak_all;
  UpdateTimeModel seconds;
};

bool ForbidsAccumulation(const JobSpec& spec) {
  return HasBatchStatistics(spec.model) && !spec.training.allow_batch_norm_accumulation;
}

constexpr const char* kBatchNormAccumulation =
    "accumulation splits the batch BatchNorm normalises over, so the plan would train another "
    "job (training.allow_batch_norm_accumulation is false)";

}  // namespace

LinearFit FitLine(const std::vector<double>& x, const std::vector<double>& y) {
  const double n = static_cast<double>(x.size());
  const double mx = std::accumulate(x.begin(), x.end(), 0.0) / n;
  const double my = std::accumulate(y.begin(), y.end(), 0.0) / n;
  double sxx = 0, sxy = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    sxx += (x[i] - mx) * (x[i] - mx);
    sxy += (x[i] - mx) * (y[i] - my);
  }
  const double slope = sxx > 0 ? sxy / sxx : 0.0;
  return {my - slope * mx, slope};
}

SegmentFit::SegmentFit(const std::vector<double>& x, const std::vector<double>& y) {
  std::vector<std::size_t> order(x.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return x[a] < x[b]; });
  for (std::size_t i : order) {
    if (!x_.empty() && x[i] == x_.back()) continue;  // a size measured twice: its first timing
    x_.push_back(x[i]);
    y_.push_back(y[i]);
  }
}

double SegmentFit::At(double x) const {
  if (x_.empty()) return 0;
  if (x_.size() == 1 || x <= x_.front()) return y_.front() * x / x_.front();
  std::size_t i = 1;  // the segment [x_[i - 1], x_[i]] that holds x, or the last one
  while (i + 1 < x_.size() && x > x_[i]) ++i;
  const double slope = (y_[i] - y_[i - 1]) / (x_[i] - x_[i - 1]);
  if (x > x_.back()) return y_.back() + std::max(0.0, slope) * (x - x_.back());
  return y_[i - 1] + slope * (x - x_[i - 1]);
}

double UpdateTimeModel::MicrobatchSeconds(int m, double checkpointed_cost_fraction) const {
  const double nothing = none.At(m);
  // Recomputing every block costs at least one more forward through them.
  const double every = std::max(all.At(m), nothing + recompute_seconds_per_sample * m);
  return nothing + checkpointed_cost_fraction * (every - nothing);
}

double UpdateTimeModel::UpdateSeconds(int effective_batch, int m,
                                      double checkpointed_cost_fraction) const {
  const int steps = AccumulationSteps(effective_batch, m);
  const int last = effective_batch - (steps - 1) * m;
  return (steps - 1) * MicrobatchSeconds(m, checkpointed_cost_fraction) +
         MicrobatchSeconds(last, checkpointed_cost_fraction) + step_seconds;
}

PlanSpec NamedBaselinePlan(const JobSpec& spec) {
  std::vector<int> all(static_cast<std::size_t>(NumBlocks(spec.model)));
  std::iota(all.begin(), all.end(), 0);
  return MakePlan(spec, ForbidsAccumulation(spec) ? spec.training.effective_batch : 1, all,
                  Precision::kFp32);
}

namespace {

// Blocks in ladder order (checkpoint_ladder.h), from one ledger, and what checkpointing the k
// first of them saves and costs.
struct BlockRanking {
  std::vector<BlockActivation> ranked;
  // Fraction of the all-blocks saving (memory) and recompute cost (time) of the k best.
  std::vector<double> saved_fraction, cost_fraction;
  double recompute_seconds_per_sample = 0;
  double input_bytes_per_sample = 0;
  // The same ledger's model state: what keeping the optimizer state on the host moves, and
  // (as the gradients' bytes) what the step inside the backward frees.
  std::int64_t parameters_bytes = 0;
  std::int64_t optimizer_state_bytes = 0;
  // In a job of more than one rank: the optimizer state ZeRO leaves to the other ranks.
  std::int64_t optimizer_state_on_other_ranks = 0;
  int output_chunk = 0;  // OutputChunkFor the same ledger
  // What the blocks keep for the backward (what offloading them moves to the host) over what
  // checkpointing them all saves, and what checkpointing keeps (their inputs) over it.
  double activations_over_saved = 1;
  double inputs_over_activations = 0;
};

Result<BlockRanking> RankBlocks(const JobSpec& spec, const Dataset& corpus) {
  const int blocks = NumBlocks(spec.model);
  JobSpec ledger_spec = spec;
  ledger_spec.plan = MakePlan(
      spec, std::min(spec.training.effective_batch, spec.planner.probe_microbatches.back()), {},
      Precision::kFp32);
  ledger_spec.plan.output_chunk = 0;  // what the whole output layer keeps
  // Sharded, so that the ledger says what of the state the other ranks would keep.
  if (spec.distributed.job_ranks > 1) ledger_spec.plan.zero_stage = 1;
  Result<MemoryLedger> ledger = MeasureLedger(ledger_spec, corpus);
  if (!ledger.ok()) return ledger.status();
  BlockRanking r;
  const auto saved = [](const BlockActivation& b) {
    return static_cast<double>(b.activation_bytes - b.checkpointed_activation_bytes);
  };
  std::vector<BlockCost> costs;
  for (const BlockActivation& b : ledger->blocks)
    costs.push_back({b.index, saved(b), b.forward_seconds});
  // MeasureLedger lists block i at position i.
  for (int index : CheckpointLadder(costs)) {
    r.ranked.push_back(ledger->blocks[static_cast<std::size_t>(index)]);
  }
  double total_saved = 0, total_cost = 0;
  for (const auto& b : r.ranked) {
    total_saved += saved(b);
    total_cost += b.forward_seconds;
  }
  r.saved_fraction.assign(blocks + 1, 0.0);
  r.cost_fraction.assign(blocks + 1, 0.0);
  for (int k = 1; k <= blocks; ++k) {
    const auto& b = r.ranked[static_cast<std::size_t>(k - 1)];
    r.saved_fraction[k] =
        r.saved_fraction[k - 1] + (total_saved > 0 ? saved(b) / total_saved : 1.0 / blocks);
    r.cost_fraction[k] =
        r.cost_fraction[k - 1] + (total_cost > 0 ? b.forward_seconds / total_cost : 1.0 / blocks);
  }
  const auto probe = static_cast<double>(ledger_spec.plan.microbatch);
  r.recompute_seconds_per_sample = total_cost / probe;
  double activations = 0, inputs = 0;
  for (const BlockActivation& b : ledger->blocks) {
    activations += static_cast<double>(b.activation_bytes);
    inputs += static_cast<double>(b.checkpointed_activation_bytes);
  }
  if (total_saved > 0) r.activations_over_saved = activations / total_saved;
  if (activations > 0) r.inputs_over_activations = inputs / activations;
  r.input_bytes_per_sample = static_cast<double>(ledger->inputs_bytes) / probe;
  // What the host would hold copies of: the parameters the optimizer steps.
  r.parameters_bytes = ledger->parameters_bytes - ledger->frozen_parameters_bytes;
  r.optimizer_state_bytes = ledger->optimizer_state_bytes + ledger->optimizer_state_on_other_ranks;
  r.optimizer_state_on_other_ranks = ledger->optimizer_state_on_other_ranks;
  r.output_chunk = OutputChunkFor(*ledger, spec.model.block_size);
  return r;
}

// An update's own cost beside its microbatches' forwards and backwards (the optimizer step, its
// clip, zeroing the gradients), from an update of one microbatch of `m` samples
// (`update_seconds`, measured) and one of k such microbatches (k = 4, or as many as the
// effective batch holds): the k - 1 more microbatches cost the difference, and the update of
// one is a microbatch and the step. At most half the update of one (the difference of two
// timings is noisy); 0 where the effective batch has no room for two microbatches. On the AMD
// EPYC the bundled job's step was 38% of its update of one sample: counted once per
// microbatch, 1 x 32 was predicted 47% slow.
double MeasureStepSeconds(const JobSpec& spec, const Dataset& corpus, Precision precision, int m,
                          double update_seconds) {
  const int k = std::min(4, spec.training.effective_batch / m);
  if (k < 2) return 0;
  const Measurement many = MeasureUpdate(spec, corpus, MakePlan(spec, m, {}, precision), k * m, 0);
  if (!many.timed()) return 0;
  const double microbatch = (many.update_seconds - update_seconds) / (k - 1);
  return std::clamp(update_seconds - microbatch, 0.0, update_seconds / 2);
}

// The microbatches the probes measure: planner.probe_microbatches within the effective batch,
// ascending, then doubling from the largest of them up to the effective batch, which closes
// the list. An update's time per sample changes with its microbatch wherever the kernels' data
// outgrows a cache or fills the device better (on an AMD EPYC the bundled job's 32 samples took
// 2.4x the time per sample of 4), so the plans' microbatches are interpolated between
// measured sizes, never extrapolated.
std::vector<int> ProbeSizes(const JobSpec& spec) {
  const int batch = spec.training.effective_batch;
  std::vector<int> sizes;
  for (int m : spec.planner.probe_microbatches) {
    if (m <= batch) sizes.push_back(m);
  }
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  while (sizes.empty() || sizes.back() < batch) {
    sizes.push_back(sizes.empty() ? batch : std::min(2 * sizes.back(), batch));
  }
  return sizes;
}

// True when `m` is one of ProbeSizes' doublings, not of planner.probe_microbatches.
bool IsBeyondTheListedProbes(const JobSpec& spec, int m) {
  const std::vector<int>& listed = spec.planner.probe_microbatches;
  return std::find(listed.begin(), listed.end(), m) == listed.end();
}

// A precision whose update at the largest listed probe size takes more than this many times
// the first precision's is not probed beyond the listed sizes: its larger microbatches are
// extrapolated along its last segment. Where bf16 has no hardware (the AMD EPYC) its probes up
// to 32 samples of the bundled job took most of 428 s of planning, for plans 25 to 30 times
// slower than fp32's.
constexpr double kSlowPrecision = 4;

// Per allowed precision: peak of a microbatch as a line in its size and the time of its
// forward and backward through the sizes, from probes of each of ProbeSizes with no block and
// with every block checkpointed, and the optimizer step's time.
Result<std::vector<PrecisionModel>> FitPrecisionModels(const JobSpec& spec, const Dataset& corpus) {
  std::vector<int> all(static_cast<std::size_t>(NumBlocks(spec.model)));
  std::iota(all.begin(), all.end(), 0);
  std::vector<PrecisionModel> models;
  std::string left_out;  // the precisions this machine's kernels cannot run the model in, why
  // The first precision's time at each size: a later one many times slower cannot make the
  // fastest plan, and is not probed beyond the listed sizes.
  std::map<int, double> first_seconds;
  for (Precision precision : spec.planner.precisions) {
    std::vector<double> sizes, peak_none, peak_all, sec_none, sec_all;
    bool never_stepped = false;
    for (int m : ProbeSizes(spec)) {
      if (!sizes.empty() && IsBeyondTheListedProbes(spec, m) &&
          first_seconds.count(static_cast<int>(sizes.back())) > 0 &&
          sec_none.back() > kSlowPrecision * first_seconds[static_cast<int>(sizes.back())]) {
        break;
      }
      Measurement none, ckpt;
      try {
        none = MeasureUpdate(spec, corpus, MakePlan(spec, m, {}, precision), m, 0);
        ckpt = MeasureUpdate(spec, corpus, MakePlan(spec, m, all, precision), m, 0);
      } catch (const std::exception& e) {
        // A reduced precision the kernels here cannot run (the 2.x wheel's oneDNN has no bf16
        // LSTM without AVX-512) is no plan on this machine; an fp32 failure is the model's.
        if (precision == Precision::kFp32) throw;
        const std::string why = ModelErrorReason(e);
        left_out += std::string(left_out.empty() ? "" : "; ") + ToString(precision) + ": " +
                    why.substr(0, why.find('\n'));
        never_stepped = true;
        break;
      }
      never_stepped = never_stepped || none.never_stepped || ckpt.never_stepped;
      if (never_stepped) continue;
      if (none.oom || ckpt.oom) break;  // too big for the device, and so is every larger one
      sizes.push_back(m);
      peak_none.push_back(static_cast<double>(none.peak_bytes));
      peak_all.push_back(static_cast<double>(ckpt.peak_bytes));
      sec_none.push_back(none.update_seconds);
      sec_all.push_back(ckpt.update_seconds);
    }
    // fp16 whose loss scaler skips every update at this job's start trains nothing: not a plan.
    if (never_stepped) continue;
    if (sizes.empty())
      return Status::InvalidArgument(
          "planner.probe_microbatches: none <= the effective batch fits on the device");
    if (first_seconds.empty()) {
      for (std::size_t i = 0; i < sizes.size(); ++i) {
        first_seconds[static_cast<int>(sizes[i])] = sec_none[i];
      }
    }
    const double step =
        MeasureStepSeconds(spec, corpus, precision, static_cast<int>(sizes[0]), sec_none[0]);
    for (double& t : sec_none) t -= step;
    for (double& t : sec_all) t -= step;
    models.push_back({precision,
                      FitLine(sizes, peak_none),
                      FitLine(sizes, peak_all),
                      {SegmentFit(sizes, sec_none), SegmentFit(sizes, sec_all), step, 0.0}});
  }
  if (!left_out.empty()) std::cerr << "trainer-run: planner: left out " << left_out << "\n";
  if (models.empty()) {
    return Status::FailedPrecondition(
        "planner.precisions: no allowed precision trains this job here" +
        (left_out.empty() ? std::string(" (an fp16 loss scaler skipped every update)")
                          : " (" + left_out + ")"));
  }
  return models;
}

// Per precision, whether the plan accumulates and where it keeps the optimizer state: why
// the parity check of such plans cannot fit the device. Empty when the plan is not to be
// checked.
using UncheckablePlans = std::map<std::tuple<Precision, bool, StatePlacement>, std::string>;

Result<UncheckablePlans> FindUncheckablePlans(const JobSpec& spec, const Dataset& corpus,
                                              const std::vector<PrecisionModel>& models,
                                              const std::vector<StatePlacement>& placements) {
  UncheckablePlans uncheckable;
  const int batch = spec.training.effective_batch;
  for (const PrecisionModel& model : models) {
    for (const bool accumulates : {false, true}) {
      if (accumulates && (batch < 2 || ForbidsAccumulation(spec))) continue;
      for (const StatePlacement placement : placements) {
        JobSpec job = spec;
        job.plan = MakePlan(spec, accumulates ? 1 : batch, {}, model.precision, placement);
        Result<std::optional<std::string>> why = WhyParityCannotFit(job, corpus);
        if (!why.ok()) return why.status();
        if (*why) uncheckable[{model.precision, accumulates, placement}] = **why;
      }
    }
  }
  return uncheckable;
}

// The smallest probe microbatch within the effective batch: where a lever is measured.
int SmallestProbeMicrobatch(const JobSpec& spec) {
  const std::vector<int>& probes = spec.planner.probe_microbatches;
  return std::min(spec.training.effective_batch, *std::min_element(probes.begin(), probes.end()));
}

// What keeping the optimizer state on the host does to a plan: the device bytes it frees, why
// the host cannot hold it (nullopt when it can), and the time it adds to every update (the
// gradients to the host, the step there, the weights back), measured.
struct HostLever {
  std::int64_t freed_bytes = 0;
  std::optional<std::string> refusal;
  double added_seconds = 0;
};

// The lever measured at the smallest probe microbatch, fp32, nothing checkpointed: the same
// update with the state on the device and on the host, each the fastest of its timed updates
// (no cost where either could not be timed: the candidates' own timings decide).
HostLever MeasureHostLever(const JobSpec& spec, const Dataset& corpus, const BlockRanking& blocks) {
  const int m = SmallestProbeMicrobatch(spec);
  const Measurement device =
      MeasureUpdate(spec, corpus, MakePlan(spec, m, {}, Precision::kFp32), m, 0);
  const Measurement host = MeasureUpdate(
      spec, corpus, MakePlan(spec, m, {}, Precision::kFp32, StatePlacement::kHost), m, 0);
  const bool timed = device.timed() && host.timed();
  return {blocks.optimizer_state_bytes, HostStateRefusal(blocks.parameters_bytes, spec.memory),
          timed ? std::max(0.0, host.update_seconds - device.update_seconds) : 0.0};
}

struct Candidate {
  PlanSpec plan;
  std::int64_t peak;
  double update_seconds;
  double duration;
};

// The predicted peak of microbatch `m` with the k best blocks checkpointed, the optimizer
// state on the device.
std::int64_t PredictPeak(const JobSpec& spec, const BlockRanking& blocks,
                         const PrecisionModel& model, int m, int k) {
  // Checkpointing never adds memory: clamp fit noise to that.
  const double none = model.peak_none.At(m), ckpt = std::min(none, model.peak_all.At(m));
  return static_cast<std::int64_t>(none - blocks.saved_fraction[k] * (none - ckpt) +
                                   blocks.input_bytes_per_sample *
                                       (spec.training.effective_batch - m));
}

// What offloading the activations of the blocks not checkpointed does to a plan: the host
// memory it may fill, the time each byte moved adds to an update (out in the forward, back in
// the backward), and per sample what the measured peak differs from the prediction by (the
// backward's restored tensors, a node's inputs at a time, less the backward's own peak that sat
// on the activations), measured.
struct OffloadLever {
  std::int64_t host_budget_bytes = 0;
  double seconds_per_byte = 0;
  double residual_bytes_per_sample = 0;
};

// The activations the blocks after the k best keep at microbatch `m` in `model`'s precision:
// their share of what checkpointing every block saves there, with the inputs checkpointing
// keeps.
double OffloadedBytes(const BlockRanking& blocks, const PrecisionModel& model, int m, int k) {
  const double none = model.peak_none.At(m), ckpt = std::min(none, model.peak_all.At(m));
  return (1.0 - blocks.saved_fraction[k]) * (none - ckpt) * blocks.activations_over_saved;
}

// The peak of microbatch `m` with the k best blocks checkpointed and the others' activations
// on the host, before the lever's residual: without those activations.
double OffloadedPeakBeforeResidual(const JobSpec& spec, const BlockRanking& blocks,
                                   const PrecisionModel& model, int m, int k) {
  return static_cast<double>(PredictPeak(spec, blocks, model, m, k)) -
         OffloadedBytes(blocks, model, m, k);
}

// The lever measured at the smallest probe microbatch, nothing checkpointed, in the first
// allowed precision: the same update with and without the activations offloaded, each the
// fastest of its timed updates and its peak (no cost where either could not be timed).
OffloadLever MeasureOffloadLever(const JobSpec& spec, const Dataset& corpus,
                                 const BlockRanking& blocks, const PrecisionModel& model) {
  const int m = SmallestProbeMicrobatch(spec);
  PlanSpec offloaded = MakePlan(spec, m, {}, model.precision);
  const Measurement kept = MeasureUpdate(spec, corpus, offloaded, m, 0);
  offloaded.offload_activations = true;
  const Measurement moved = MeasureUpdate(spec, corpus, offloaded, m, 0);
  const bool timed = kept.timed() && moved.timed();
  const double bytes = OffloadedBytes(blocks, model, m, 0);
  if (!timed || bytes <= 0) return {HostBudgetBytes(spec.memory), 0.0, 0.0};
  return {HostBudgetBytes(spec.memory),
          std::max(0.0, moved.update_seconds - kept.update_seconds) / bytes,
          (static_cast<double>(moved.peak_bytes) -
           OffloadedPeakBeforeResidual(spec, blocks, model, m, 0)) /
              m};
}

// The predicted peak of microbatch `m` with the k best blocks checkpointed and the others'
// activations on the host: without them, with the lever's residual; with a block checkpointed,
// at least every block checkpointed less the inputs the offloaded ones would have kept (a
// checkpointed block's recompute is then the backward's peak).
std::int64_t PredictOffloadedPeak(const JobSpec& spec, const BlockRanking& blocks,
                                  const PrecisionModel& model, const OffloadLever& offload, int m,
                                  int k) {
  const double kept = OffloadedPeakBeforeResidual(spec, blocks, model, m, k) +
                      offload.residual_bytes_per_sample * m;
  const double recomputing =
      k > 0 ? static_cast<double>(PredictPeak(spec, blocks, model, m, NumBlocks(spec.model))) -
                  OffloadedBytes(blocks, model, m, k) * blocks.inputs_over_activations
            : 0.0;
  return static_cast<std::int64_t>(std::max(kept, recomputing));
}

// Whether some plan, with its optimizer state on the device, is predicted over usable: only
// then can keeping the state on the host let a plan fit that did not (the lever never makes
// an update faster, so a plan that fits gains nothing by it).
bool SomePlanExceedsUsable(const JobSpec& spec, const BlockRanking& blocks,
                           const std::vector<PrecisionModel>& models) {
  return std::any_of(models.begin(), models.end(), [&](const PrecisionModel& model) {
    return PredictPeak(spec, blocks, model, spec.training.effective_batch, 0) >
           spec.memory.usable_bytes();
  });
}

// Every plan (microbatch, the k best blocks checkpointed, precision) with its predicted peak
// and duration, and, given `host`, the same plan with the optimizer state on the host where
// its device twin is predicted over usable: those that fit, fastest first, and the rest in
// `rejected` with the reason.
std::vector<Candidate> PredictCandidates(const JobSpec& spec, const BlockRanking& blocks,
                                         const std::vector<PrecisionModel>& models,
                                         const UncheckablePlans& uncheckable,
                                         const std::optional<HostLever>& host,
                                         const std::optional<OffloadLever>& offload,
                                         std::vector<RejectedPlan>* rejected) {
  const int batch = spec.training.effective_batch;
  const std::int64_t usable = spec.memory.usable_bytes();
  std::vector<Candidate> fitting;
  const auto judge = [&](const PlanSpec& plan, std::int64_t peak, double update_seconds) {
    const double duration = update_seconds * spec.training.updates;
    const auto unchecked =
        uncheckable.find({plan.precision, plan.accumulation_steps > 1, plan.optimizer_state});
    if (plan.accumulation_steps > 1 && ForbidsAccumulation(spec)) {
      rejected->push_back({plan, peak, duration, kBatchNormAccumulation});
    } else if (peak > usable) {
      rejected->push_back(
          {plan, peak, duration,
           "predicted peak " + FormatBytes(peak) + " exceeds usable " + FormatBytes(usable)});
    } else if (plan.optimizer_state == StatePlacement::kHost && host->refusal) {
      rejected->push_back({plan, peak, duration, *host->refusal});
    } else if (unchecked != uncheckable.end()) {
      rejected->push_back({plan, peak, duration, unchecked->second});
    } else {
      fitting.push_back({plan, peak, update_seconds, duration});
    }
  };
  for (const PrecisionModel& model : models) {
    for (int m = 1; m <= batch; ++m) {
      for (int k = 0; k <= NumBlocks(spec.model); ++k) {
        std::vector<int> chosen;
        for (int i = 0; i < k; ++i) {
          chosen.push_back(blocks.ranked[static_cast<std::size_t>(i)].index);
        }
        std::sort(chosen.begin(), chosen.end());
        const PlanSpec plan = MakePlan(spec, m, chosen, model.precision);
        const std::int64_t peak = PredictPeak(spec, blocks, model, m, k);
        const double update_seconds =
            model.seconds.UpdateSeconds(batch, m, blocks.cost_fraction[k]);
        judge(plan, peak, update_seconds);
        if (host && peak > usable) {
          PlanSpec on_host = plan;
          on_host.optimizer_state = StatePlacement::kHost;
          judge(on_host, peak - host->freed_bytes, update_seconds + host->added_seconds);
        }
        // The step inside the backward frees the gradients (all but one parameter's); with
        // clipping it runs the forward and backward twice, the first measuring the norm.
        PlanSpec in_backward = plan;
        in_backward.step_in_backward = true;
        if (peak > usable && !StepInBackwardRefusal(in_backward, spec.model, spec.distributed)) {
          judge(in_backward, peak - blocks.parameters_bytes,
                update_seconds + (spec.training.grad_clip > 0
                                      ? model.seconds.MicrobatchSeconds(m, blocks.cost_fraction[k])
                                      : 0.0));
        }
        // Offloading the blocks not checkpointed moves their activations to the host and back.
        if (offload && peak > usable && k < NumBlocks(spec.model)) {
          PlanSpec offloaded = plan;
          offloaded.offload_activations = true;
          const double moved = OffloadedBytes(blocks, model, m, k);
          const std::int64_t offloaded_peak =
              PredictOffloadedPeak(spec, blocks, model, *offload, m, k);
          const double offloaded_seconds =
              update_seconds + offload->seconds_per_byte * moved * plan.accumulation_steps;
          if (moved > static_cast<double>(offload->host_budget_bytes)) {
            rejected->push_back(
                {offloaded, offloaded_peak, offloaded_seconds * spec.training.updates,
                 "its activations on the host (" + FormatBytes(static_cast<std::int64_t>(moved)) +
                     ") exceed the host budget of " + FormatBytes(offload->host_budget_bytes) +
                     " (memory.host_budget)"});
          } else {
            judge(offloaded, offloaded_peak, offloaded_seconds);
          }
        }
        // The one-process probes cannot time the collectives sharding adds (a broadcast of
        // the weights per update): a sharded twin is predicted as fast as its unsharded one.
        for (int stage : spec.planner.zero_stages) {
          if (stage == 0 || spec.distributed.job_ranks == 1 || peak <= usable) continue;
          PlanSpec sharded = plan;
          sharded.zero_stage = stage;
          judge(sharded, peak - blocks.optimizer_state_on_other_ranks, update_seconds);
        }
      }
    }
  }
  std::sort(fitting.begin(), fitting.end(), [](const Candidate& a, const Candidate& b) {
    if (a.duration != b.duration) return a.duration < b.duration;
    if (a.peak != b.peak) return a.peak < b.peak;
    return a.plan.zero_stage < b.plan.zero_stage;  // the fewer collectives
  });
  return fitting;
}

// The search (probes, screening and rounds) may take this fraction of the window, or of the
// fastest predicted job where there is no window.
constexpr double kSearchFraction = 0.02;
// Screening times at least this many fitting plans whatever the budget.
constexpr int kMinScreened = 3;
// Plans screened within this factor of the fastest screened one go on to the rounds, at most
// kMaxFinalists of them; each is timed kRounds times in all.
constexpr double kFinalistBand = 1.3;
constexpr std::size_t kMaxFinalists = 4;
constexpr int kRounds = 5;

class SearchClock {
 public:
  SearchClock(const JobSpec& spec, const std::vector<Candidate>& fitting, Clock::time_point start)
      : start_(start),
        budget_seconds_(kSearchFraction * (spec.window_seconds ? *spec.window_seconds
                                           : fitting.empty()   ? 0.0
                                                               : fitting.front().duration)) {}
  double Elapsed() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }
  // True when `seconds` more still ends inside the budget.
  bool Allows(double seconds) const { return Elapsed() + seconds <= budget_seconds_; }

 private:
  Clock::time_point start_;
  double budget_seconds_;
};

// What screening and the rounds hand to the choice: a plan, its timings, its highest peak.
struct TimedCandidate {
  Candidate candidate;
  TimedPlan timing;
  std::int64_t measured_peak = 0;
  double visit_seconds = 0;  // wall time of its last visit: build, warm-up, timed updates
};

// For each precision and accumulation step count, the fitting candidate predicted fastest:
// the smallest microbatch of that count with the fewest blocks predicted to fit. Predicted
// order. The time model's probes are small microbatches, so its extrapolation only orders
// these; the choice between them is measured.
std::vector<Candidate> ShortlistPerStepCount(const std::vector<Candidate>& fitting) {
  std::vector<Candidate> shortlist;
  for (const Candidate& c : fitting) {
    const bool seen = std::any_of(shortlist.begin(), shortlist.end(), [&](const Candidate& s) {
      return s.plan.precision == c.plan.precision &&
             s.plan.accumulation_steps == c.plan.accumulation_steps;
    });
    if (!seen) shortlist.push_back(c);
  }
  return shortlist;
}

std::string OverUsableReason(const Measurement& real, std::int64_t usable) {
  return real.oom ? "out of memory when validated under the usable limit"
                  : "measured peak " + FormatBytes(real.peak_bytes) + " exceeds usable " +
                        FormatBytes(usable);
}

// One more timing of `timed`'s plan (MeasureUpdate) under the usable limit; false (and the
// plan rejected) when it ran out of memory or peaked above usable.
bool TimeOnce(const JobSpec& spec, const Dataset& corpus, TimedCandidate* timed,
              std::vector<RejectedPlan>* rejected) {
  const std::int64_t usable = spec.memory.usable_bytes();
  const auto visit_start = Clock::now();
  const Measurement real =
      MeasureUpdate(spec, corpus, timed->candidate.plan, spec.training.effective_batch, usable);
  timed->visit_seconds = std::chrono::duration<double>(Clock::now() - visit_start).count();
  if (real.oom || real.never_stepped || real.peak_bytes > usable) {
    rejected->push_back(
        {timed->candidate.plan, timed->candidate.peak, timed->candidate.duration,
         real.never_stepped ? "the fp16 loss scaler skipped every warm-up update: it trains nothing"
                            : OverUsableReason(real, usable),
         /*validated=*/true});
    return false;
  }
  timed->timing.update_seconds.push_back(real.update_seconds);
  timed->measured_peak = std::max(timed->measured_peak, real.peak_bytes);
  return true;
}

// Round 1: each shortlisted plan timed once, fastest predicted first, while the search budget
// lasts (and at least kMinScreened that fit). Those that fit, fastest measured first.
std::vector<TimedCandidate> Screen(const JobSpec& spec, const Dataset& corpus,
                                   const std::vector<Candidate>& shortlist,
                                   const SearchClock& clock, std::vector<RejectedPlan>* rejected) {
  std::vector<TimedCandidate> screened;
  double last_visit = 0;
  for (const Candidate& candidate : shortlist) {
    if (static_cast<int>(screened.size()) >= kMinScreened && !clock.Allows(last_visit)) break;
    TimedCandidate timed{candidate, {candidate.plan, {}}};
    const bool fits = TimeOnce(spec, corpus, &timed, rejected);
    last_visit = timed.visit_seconds;
    if (fits) screened.push_back(std::move(timed));
  }
  std::stable_sort(screened.begin(), screened.end(),
                   [](const TimedCandidate& a, const TimedCandidate& b) {
                     return a.timing.update_seconds[0] < b.timing.update_seconds[0];
                   });
  return screened;
}

// Rounds 2..kRounds: the finalists (the front of `screened` within kFinalistBand of the
// fastest) timed again in turn, so that a slow spell of the machine falls on all of them; a
// round starts only when the budget holds all of it. The rest of `screened` is rejected.
std::vector<TimedCandidate> TimeFinalists(const JobSpec& spec, const Dataset& corpus,
                                          std::vector<TimedCandidate> screened,
                                          const SearchClock& clock,
                                          std::vector<RejectedPlan>* rejected) {
  std::vector<TimedCandidate> finalists;
  const double fastest = screened.front().timing.update_seconds[0];
  for (TimedCandidate& timed : screened) {
    const double ratio = timed.timing.update_seconds[0] / fastest;
    if (finalists.size() < kMaxFinalists && ratio <= kFinalistBand) {
      finalists.push_back(std::move(timed));
      continue;
    }
    char reason[160];
    std::snprintf(reason, sizeof(reason),
                  "screened: its update took %.2fx the fastest screened plan's, not a finalist",
                  ratio);
    rejected->push_back({timed.candidate.plan, timed.candidate.peak, timed.candidate.duration,
                         reason, /*validated=*/true, timed.timing.update_seconds[0]});
  }
  for (int round = 2; round <= kRounds; ++round) {
    double round_seconds = 0;
    for (const TimedCandidate& f : finalists) round_seconds += f.visit_seconds;
    if (finalists.size() < 2 || !clock.Allows(round_seconds)) break;
    std::vector<TimedCandidate> still_fitting;
    for (TimedCandidate& f : finalists) {
      if (TimeOnce(spec, corpus, &f, rejected)) still_fitting.push_back(std::move(f));
    }
    finalists = std::move(still_fitting);
  }
  return finalists;
}

void ChooseTimed(const JobSpec& spec, const std::vector<TimedCandidate>& finalists,
                 ChosenPlan* result, std::vector<RejectedPlan>* rejected) {
  const int batch = spec.training.effective_batch;
  for (const TimedCandidate& f : finalists) result->selection.timed.push_back(f.timing);
  const PlanSelection selection = SelectFastestPlan(result->selection.timed, batch);
  for (std::size_t i = 0; i < finalists.size(); ++i) {
    if (i == selection.chosen) continue;
    const Candidate& c = finalists[i].candidate;
    rejected->push_back({c.plan, c.peak, c.duration,
                         WhyNotChosen(selection, result->selection.timed, i, batch),
                         /*validated=*/true, finalists[i].timing.MedianSeconds()});
  }
  const TimedCandidate& chosen = finalists[selection.chosen];
  result->plan = chosen.candidate.plan;
  result->measured_peak_bytes = chosen.measured_peak;
  result->predicted_peak_bytes = chosen.candidate.peak;
  result->predicted_update_seconds = chosen.candidate.update_seconds;
  result->measured_update_seconds = chosen.timing.MedianSeconds();
  result->selection.noise = selection.noise;
  result->selection.tie_band = selection.tie_band;
  result->fits_memory = true;
}

// The last resort when no candidate fitted when timed: the named baseline, then (`host`) the
// baseline with its optimizer state on the host, then, where it has one microbatch per
// update, the baseline stepped inside the backward, or OutOfMemory.
Status ValidateBaseline(const JobSpec& spec, const Dataset& corpus,
                        const std::optional<HostLever>& host, ChosenPlan* result,
                        std::vector<RejectedPlan>* rejected) {
  const std::int64_t usable = spec.memory.usable_bytes();
  PlanSpec plan = NamedBaselinePlan(spec);
  TimedCandidate baseline{{plan, 0, 0, 0}, {plan, {}}};
  bool fits = TimeOnce(spec, corpus, &baseline, rejected);
  if (!fits && host && !host->refusal) {
    plan.optimizer_state = StatePlacement::kHost;
    baseline = {{plan, 0, 0, 0}, {plan, {}}};
    fits = TimeOnce(spec, corpus, &baseline, rejected);
  }
  // A baseline of one microbatch per update (a BatchNorm job, a batch of one) may step
  // inside the backward instead, its gradients never all alive.
  PlanSpec in_backward = plan;
  in_backward.optimizer_state = StatePlacement::kDevice;
  in_backward.step_in_backward = true;
  if (!fits && !StepInBackwardRefusal(in_backward, spec.model, spec.distributed)) {
    baseline = {{in_backward, 0, 0, 0}, {in_backward, {}}};
    fits = TimeOnce(spec, corpus, &baseline, rejected);
  }
  if (!fits) {
    // A plan never changes the job; adapters would, and are the team's to choose.
    const std::string adapters =
        spec.finetune.method == FinetuneMethod::kFull
            ? ". A plan keeps the job; the job's own choice would be low-rank adapters with the "
              "base frozen (finetune: {method: lora}), whose gradients and optimizer state are "
              "the adapters' alone (docs/model-state.md)"
            : "";
    return Status::OutOfMemory(
        "does not fit: even the named baseline (" + DescribePlan(baseline.candidate.plan) +
        ") needs more than " + FormatBytes(usable) + " usable (memory.budget " +
        FormatBytes(spec.memory.budget_bytes) + " less " +
        std::to_string(static_cast<int>(spec.memory.reserve_fraction * 100)) + "% reserve)" +
        (HostIsTheDevice(spec) ? "; on the CPU the host is the device, so keeping the optimizer "
                                 "state on the host would free nothing and was not tried"
                               : "") +
        adapters);
  }
  result->plan = baseline.candidate.plan;
  result->measured_peak_bytes = result->predicted_peak_bytes = baseline.measured_peak;
  // The time model has no figure for the last resort (its precision may not have been probed):
  // predicted_update_seconds stays 0, and every refused plan is an alternative to it.
  result->measured_update_seconds = baseline.timing.update_seconds[0];
  result->selection.timed = {baseline.timing};
  result->fits_memory = true;
  return Status::Ok();
}

// Times the shortlist with real updates under the usable limit (the time model cannot see
// cache effects or kernels that grow more efficient with size), then the finalists in
// interleaved rounds, and chooses by median with ties broken by preference.
Status ChooseMeasured(const JobSpec& spec, const Dataset& corpus,
                      const std::vector<Candidate>& fitting, const std::optional<HostLever>& host,
                      Clock::time_point started, ChosenPlan* result,
                      std::vector<RejectedPlan>* rejected) {
  const SearchClock clock(spec, fitting, started);
  std::vector<TimedCandidate> screened =
      Screen(spec, corpus, ShortlistPerStepCount(fitting), clock, rejected);
  if (screened.empty()) return ValidateBaseline(spec, corpus, host, result, rejected);
  ChooseTimed(spec, TimeFinalists(spec, corpus, std::move(screened), clock, rejected), result,
              rejected);
  return Status::Ok();
}

// Steps 1 and 2: the plans predicted to fit (fastest first) and those refused on prediction,
// for `spec`, the job with the output chunk every plan takes.
struct WeighedPlans {
  JobSpec spec;
  std::optional<HostLever> host = std::nullopt;
  std::vector<Candidate> fitting = {};
  std::vector<RejectedPlan> rejected = {};
};

Result<WeighedPlans> WeighPlans(const JobSpec& job, const Dataset& corpus,
                                const PlanOptions& options) {
  Result<BlockRanking> blocks = RankBlocks(job, corpus);
  if (!blocks.ok()) return blocks.status();
  // Every plan from here on, the probes' included, takes the output layer in the ledger's chunk.
  WeighedPlans weighed{job};
  JobSpec& spec = weighed.spec;
  spec.plan.output_chunk = blocks->output_chunk;
  Result<std::vector<PrecisionModel>> models = FitPrecisionModels(spec, corpus);
  if (!models.ok()) return models.status();
  for (PrecisionModel& model : *models) {
    model.seconds.recompute_seconds_per_sample = blocks->recompute_seconds_per_sample;
  }
  std::optional<HostLever>& host = weighed.host;
  std::optional<OffloadLever> offload;
  std::vector<StatePlacement> placements = {StatePlacement::kDevice};
  if (SomePlanExceedsUsable(spec, *blocks, *models)) {
    if (MayKeepStateOnTheHost(spec)) {
      host = MeasureHostLever(spec, corpus, *blocks);
      placements.push_back(StatePlacement::kHost);
    }
    if (!OffloadActivationsRefusal(spec)) {
      offload = MeasureOffloadLever(spec, corpus, *blocks, models->front());
    }
  }
  Result<UncheckablePlans> uncheckable =
      options.parity_checked ? FindUncheckablePlans(spec, corpus, *models, placements)
                             : Result<UncheckablePlans>(UncheckablePlans{});
  if (!uncheckable.ok()) return uncheckable.status();
  weighed.fitting =
      PredictCandidates(spec, *blocks, *models, *uncheckable, host, offload, &weighed.rejected);
  return weighed;
}

}  // namespace

Result<std::vector<PredictedPlan>> PredictPlans(const JobSpec& job, const Dataset& corpus,
                                                const PlanOptions& options) {
  Result<WeighedPlans> weighed = WeighPlans(job, corpus, options);
  if (!weighed.ok()) return weighed.status();
  std::vector<PredictedPlan> plans;
  for (const Candidate& c : weighed->fitting)
    plans.push_back({c.plan, c.peak, c.update_seconds, ""});
  for (const RejectedPlan& r : weighed->rejected) {
    plans.push_back({r.plan, r.predicted_peak_bytes,
                     r.predicted_duration_seconds / job.training.updates, r.reason});
  }
  return plans;
}

Result<ChosenPlan> PlanJob(const JobSpec& job, const Dataset& corpus, const PlanOptions& options) {
  const auto started = Clock::now();
  Result<WeighedPlans> weighed = WeighPlans(job, corpus, options);
  if (!weighed.ok()) return weighed.status();
  const JobSpec& spec = weighed->spec;
  std::vector<RejectedPlan>& rejected = weighed->rejected;
  ChosenPlan result;
  result.usable_bytes = spec.memory.usable_bytes();
  result.host_is_the_device = HostIsTheDevice(spec);
  result.simulated_device = spec.memory.simulated_device;
  result.window_seconds = spec.window_seconds;
  if (Status s = ChooseMeasured(spec, corpus, weighed->fitting, weighed->host, started, &result,
                                &rejected);
      !s.ok()) {
    return s;
  }
  result.predicted_duration_seconds = result.measured_update_seconds * spec.training.updates;
  result.modelled_duration_seconds = result.predicted_update_seconds * spec.training.updates;
  result.fits_window =
      !spec.window_seconds || result.predicted_duration_seconds <= *spec.window_seconds;
  result.rejected = FasterAlternatives(rejected, result);
  result.probe_seconds = std::chrono::duration<double>(Clock::now() - started).count();
  return result;
}

std::vector<RejectedPlan> FasterAlternatives(const std::vector<RejectedPlan>& rejected,
                                             const ChosenPlan& chosen) {
  std::vector<RejectedPlan> faster;
  for (const RejectedPlan& r : rejected) {
    if (r.validated || chosen.modelled_duration_seconds <= 0 ||
        r.predicted_duration_seconds < chosen.modelled_duration_seconds) {
      faster.push_back(r);
    }
  }
  std::sort(faster.begin(), faster.end(), [](const RejectedPlan& a, const RejectedPlan& b) {
    return a.predicted_duration_seconds < b.predicted_duration_seconds;
  });
  if (faster.size() > 10) faster.resize(10);
  return faster;
}

}  // namespace trainerd
