#include "trainerd/trainer/planner.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "trainerd/trainer/device_memory.h"
#include "trainerd/trainer/device_timer.h"
#include "trainerd/trainer/memory_ledger.h"
#include "trainerd/trainer/trainer.h"
#include "trainerd/trainer/units.h"

namespace trainerd {
namespace {

using Clock = std::chrono::steady_clock;

int Steps(int effective_batch, int microbatch) {
  return (effective_batch + microbatch - 1) / microbatch;
}

PlanSpec MakePlan(const JobSpec& spec, int microbatch, std::vector<int> blocks,
                  Precision precision) {
  return {microbatch, Steps(spec.training.effective_batch, microbatch), std::move(blocks),
          precision};
}

struct Measurement {
  std::int64_t peak_bytes = 0;
  double update_seconds = 0;
  bool oom = false;
};

// One real optimizer update of `plan` (after one warm-up update) under `limit` bytes.
// `effective_batch` overrides the job's, so the probe can time a single microbatch.
Measurement MeasureUpdate(const JobSpec& spec, const Dataset& corpus, const PlanSpec& plan,
                          int effective_batch, std::int64_t limit) {
  JobSpec job = spec;
  job.plan = plan;
  job.training.effective_batch = effective_batch;
  Measurement m;
  NullEventSink discard;
  try {
    Trainer trainer(job, corpus, &discard);
    DeviceMemory& memory = MemoryOf(trainer.device());
    ScopedMemoryLimit limited(memory, limit);
    trainer.TrainUpdate(0);
    memory.ResetPeak();
    const DeviceTimer timer(trainer.device());
    trainer.TrainUpdate(1);
    m.update_seconds = timer.Seconds();
    m.peak_bytes = memory.peak_bytes();
  } catch (const c10::OutOfMemoryError&) {
    m.oom = true;
  }
  return m;
}

// Peak and time of one microbatch as linear functions of its size, with no blocks and with
// every block checkpointed.
struct PrecisionModel {
  Precision precision;
  LinearFit peak_none, peak_all, seconds_none, seconds_all;
};

bool ForbidsAccumulation(const JobSpec& spec) {
  return HasBatchStatistics(spec.model) && !spec.training.allow_batch_norm_accumulation;
}

constexpr const char* kBatchNormAccumulation =
    "accumulation splits the batch BatchNorm normalises over, so the plan would train another "
    "job (training.allow_batch_norm_accumulation is false)";

std::string Describe(const PlanSpec& plan) {
  return "microbatch " + std::to_string(plan.microbatch) + " x " +
         std::to_string(plan.accumulation_steps) + ", " +
         std::to_string(plan.checkpoint_blocks.size()) + " blocks checkpointed, " +
         ToString(plan.precision);
}

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

PlanSpec NamedBaselinePlan(const JobSpec& spec) {
  std::vector<int> all(static_cast<std::size_t>(NumBlocks(spec.model)));
  std::iota(all.begin(), all.end(), 0);
  return MakePlan(spec, ForbidsAccumulation(spec) ? spec.training.effective_batch : 1, all,
                  Precision::kFp32);
}

namespace {

// Blocks ranked by activation bytes saved per second of recompute, from one ledger, and what
// checkpointing the k best of them saves and costs.
struct BlockRanking {
  std::vector<BlockActivation> ranked;
  // Fraction of the all-blocks saving (memory) and recompute cost (time) of the k best.
  std::vector<double> saved_fraction, cost_fraction;
  double recompute_seconds_per_sample = 0;
  double input_bytes_per_sample = 0;
};

Result<BlockRanking> RankBlocks(const JobSpec& spec, const Dataset& corpus) {
  const int blocks = NumBlocks(spec.model);
  JobSpec ledger_spec = spec;
  ledger_spec.plan = MakePlan(
      spec, std::min(spec.training.effective_batch, spec.planner.probe_microbatches.back()), {},
      Precision::kFp32);
  Result<MemoryLedger> ledger = MeasureLedger(ledger_spec, corpus);
  if (!ledger.ok()) return ledger.status();
  BlockRanking r;
  r.ranked = ledger->blocks;
  const auto saved = [](const BlockActivation& b) {
    return static_cast<double>(b.activation_bytes - b.checkpointed_activation_bytes);
  };
  std::stable_sort(r.ranked.begin(), r.ranked.end(),
                   [&](const BlockActivation& a, const BlockActivation& b) {
                     return saved(a) / std::max(a.forward_seconds, 1e-9) >
                            saved(b) / std::max(b.forward_seconds, 1e-9);
                   });
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
  r.input_bytes_per_sample = static_cast<double>(ledger->inputs_bytes) / probe;
  return r;
}

// Per allowed precision: peak and time of a microbatch as lines in its size, from probes of
// each planner.probe_microbatches size with no block and with every block checkpointed.
Result<std::vector<PrecisionModel>> FitPrecisionModels(const JobSpec& spec, const Dataset& corpus) {
  std::vector<int> all(static_cast<std::size_t>(NumBlocks(spec.model)));
  std::iota(all.begin(), all.end(), 0);
  std::vector<PrecisionModel> models;
  for (Precision precision : spec.planner.precisions) {
    std::vector<double> sizes, peak_none, peak_all, sec_none, sec_all;
    for (int m : spec.planner.probe_microbatches) {
      if (m > spec.training.effective_batch) continue;
      const Measurement none = MeasureUpdate(spec, corpus, MakePlan(spec, m, {}, precision), m, 0);
      const Measurement ckpt = MeasureUpdate(spec, corpus, MakePlan(spec, m, all, precision), m, 0);
      sizes.push_back(m);
      peak_none.push_back(static_cast<double>(none.peak_bytes));
      peak_all.push_back(static_cast<double>(ckpt.peak_bytes));
      sec_none.push_back(none.update_seconds);
      sec_all.push_back(ckpt.update_seconds);
    }
    if (sizes.empty())
      return Status::InvalidArgument("planner.probe_microbatches: none <= the effective batch");
    models.push_back({precision, FitLine(sizes, peak_none), FitLine(sizes, peak_all),
                      FitLine(sizes, sec_none), FitLine(sizes, sec_all)});
  }
  return models;
}

struct Candidate {
  PlanSpec plan;
  std::int64_t peak;
  double update_seconds;
  double duration;
};

// Every plan (microbatch, the k best blocks checkpointed, precision) with its predicted peak
// and duration: those that fit, fastest first with the named baseline last, and the rest in
// `rejected` with the reason.
std::vector<Candidate> PredictCandidates(const JobSpec& spec, const BlockRanking& blocks,
                                         const std::vector<PrecisionModel>& models,
                                         std::vector<RejectedPlan>* rejected) {
  const int batch = spec.training.effective_batch;
  const std::int64_t usable = spec.memory.usable_bytes();
  std::vector<Candidate> fitting;
  for (const PrecisionModel& model : models) {
    for (int m = 1; m <= batch; ++m) {
      for (int k = 0; k <= NumBlocks(spec.model); ++k) {
        std::vector<int> chosen;
        for (int i = 0; i < k; ++i) {
          chosen.push_back(blocks.ranked[static_cast<std::size_t>(i)].index);
        }
        std::sort(chosen.begin(), chosen.end());
        const PlanSpec plan = MakePlan(spec, m, chosen, model.precision);
        // Checkpointing never adds memory: clamp fit noise to that.
        const double none = model.peak_none.At(m), ckpt = std::min(none, model.peak_all.At(m));
        const auto peak =
            static_cast<std::int64_t>(none - blocks.saved_fraction[k] * (none - ckpt) +
                                      blocks.input_bytes_per_sample * (batch - m));
        // Recomputing every block costs at least one more forward through them.
        const double t_none = model.seconds_none.At(m);
        const double t_all =
            std::max(model.seconds_all.At(m), t_none + blocks.recompute_seconds_per_sample * m);
        const double update_seconds =
            plan.accumulation_steps *
            std::max(1e-6, t_none + blocks.cost_fraction[k] * (t_all - t_none));
        const double duration = update_seconds * spec.training.updates;
        if (plan.accumulation_steps > 1 && ForbidsAccumulation(spec)) {
          rejected->push_back({plan, peak, duration, kBatchNormAccumulation});
        } else if (peak <= usable) {
          fitting.push_back({plan, peak, update_seconds, duration});
        } else {
          rejected->push_back(
              {plan, peak, duration,
               "predicted peak " + FormatBytes(peak) + " exceeds usable " + FormatBytes(usable)});
        }
      }
    }
  }
  std::sort(fitting.begin(), fitting.end(), [](const Candidate& a, const Candidate& b) {
    if (a.duration != b.duration) return a.duration < b.duration;
    return a.peak < b.peak;
  });
  fitting.push_back({NamedBaselinePlan(spec), 0, 0, 0});  // always tried last
  return fitting;
}

// Validates the best-predicted plans with real updates under the usable limit and keeps the
// fastest measured one: the linear time model cannot see cache effects between close
// candidates. A plan that OOMs or measures above usable is rejected with its reason; the
// named baseline failing so is the job not fitting at all.
Status ValidateFastest(const JobSpec& spec, const Dataset& corpus,
                       const std::vector<Candidate>& fitting, ChosenPlan* result,
                       std::vector<RejectedPlan>* rejected) {
  constexpr int kMaxValidations = 8;
  constexpr int kFastestToCompare = 3;
  const std::int64_t usable = spec.memory.usable_bytes();
  int validations = 0, validated = 0;
  double best_measured = 0;
  for (const Candidate& candidate : fitting) {
    const bool is_baseline = &candidate == &fitting.back();
    if (validated >= kFastestToCompare || (is_baseline && validated > 0)) break;
    if (!is_baseline && validations >= kMaxValidations) continue;
    ++validations;
    const Measurement real =
        MeasureUpdate(spec, corpus, candidate.plan, spec.training.effective_batch, usable);
    if (real.oom || real.peak_bytes > usable) {
      rejected->push_back({candidate.plan, candidate.peak, candidate.duration,
                           real.oom ? "out of memory when validated under the usable limit"
                                    : "measured peak " + FormatBytes(real.peak_bytes) +
                                          " exceeds usable " + FormatBytes(usable),
                           /*validated=*/true});
      if (is_baseline) {
        return Status::OutOfMemory(
            "does not fit: even the named baseline (" + Describe(candidate.plan) +
            ") needs more than " + FormatBytes(usable) + " usable (memory.budget " +
            FormatBytes(spec.memory.budget_bytes) + " less " +
            std::to_string(static_cast<int>(spec.memory.reserve_fraction * 100)) + "% reserve)");
      }
      continue;
    }
    ++validated;
    if (result->fits_memory && real.update_seconds >= best_measured) {
      rejected->push_back({candidate.plan, candidate.peak, candidate.duration,
                           "validated, but its measured update was slower than the chosen plan's",
                           /*validated=*/true});
      continue;
    }
    best_measured = real.update_seconds;
    result->plan = candidate.plan;
    result->measured_peak_bytes = real.peak_bytes;
    result->predicted_peak_bytes = is_baseline ? real.peak_bytes : candidate.peak;
    result->predicted_update_seconds = is_baseline ? real.update_seconds : candidate.update_seconds;
    result->predicted_duration_seconds = result->predicted_update_seconds * spec.training.updates;
    result->fits_memory = true;
  }
  return Status::Ok();
}

// The ten alternatives that were validated or predicted faster than the chosen plan.
std::vector<RejectedPlan> FasterAlternatives(const std::vector<RejectedPlan>& rejected,
                                             double chosen_duration) {
  std::vector<RejectedPlan> faster;
  for (const RejectedPlan& r : rejected) {
    if (r.validated || r.predicted_duration_seconds < chosen_duration) faster.push_back(r);
  }
  std::sort(faster.begin(), faster.end(), [](const RejectedPlan& a, const RejectedPlan& b) {
    return a.predicted_duration_seconds < b.predicted_duration_seconds;
  });
  if (faster.size() > 10) faster.resize(10);
  return faster;
}

}  // namespace

Result<ChosenPlan> PlanJob(const JobSpec& spec, const Dataset& corpus) {
  const auto started = Clock::now();
  Result<BlockRanking> blocks = RankBlocks(spec, corpus);
  if (!blocks.ok()) return blocks.status();
  Result<std::vector<PrecisionModel>> models = FitPrecisionModels(spec, corpus);
  if (!models.ok()) return models.status();
  std::vector<RejectedPlan> rejected;
  const std::vector<Candidate> fitting = PredictCandidates(spec, *blocks, *models, &rejected);

  ChosenPlan result;
  result.usable_bytes = spec.memory.usable_bytes();
  result.window_seconds = spec.window_seconds;
  if (Status s = ValidateFastest(spec, corpus, fitting, &result, &rejected); !s.ok()) return s;
  result.fits_window =
      !spec.window_seconds || result.predicted_duration_seconds <= *spec.window_seconds;
  result.rejected = FasterAlternatives(rejected, result.predicted_duration_seconds);
  result.probe_seconds = std::chrono::duration<double>(Clock::now() - started).count();
  return result;
}

nlohmann::json ChosenPlan::ToJson() const {
  nlohmann::json rejected_json = nlohmann::json::array();
  for (const RejectedPlan& r : rejected) {
    nlohmann::json entry = trainerd::ToJson(r.plan);
    entry["predicted_peak_bytes"] = r.predicted_peak_bytes;
    entry["predicted_duration_seconds"] = r.predicted_duration_seconds;
    entry["reason"] = r.reason;
    rejected_json.push_back(entry);
  }
  nlohmann::json out = trainerd::ToJson(plan);
  out["predicted_peak_bytes"] = predicted_peak_bytes;
  out["measured_peak_bytes"] = measured_peak_bytes;
  out["usable_bytes"] = usable_bytes;
  out["predicted_update_seconds"] = predicted_update_seconds;
  out["predicted_duration_seconds"] = predicted_duration_seconds;
  out["window_seconds"] =
      window_seconds ? nlohmann::json(*window_seconds) : nlohmann::json(nullptr);
  out["fits_memory"] = fits_memory;
  out["fits_window"] = fits_window;
  out["probe_seconds"] = probe_seconds;
  out["rejected"] = rejected_json;
  return out;
}

std::string ChosenPlan::ToText() const {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof(line), "plan: %s\n", Describe(plan).c_str());
  out += line;
  std::snprintf(line, sizeof(line), "  peak: predicted %s, measured %s, usable %s\n",
                FormatBytes(predicted_peak_bytes).c_str(), FormatBytes(measured_peak_bytes).c_str(),
                FormatBytes(usable_bytes).c_str());
  out += line;
  std::snprintf(line, sizeof(line), "  time: %.3fs per update, job %s", predicted_update_seconds,
                FormatDuration(predicted_duration_seconds).c_str());
  out += line;
  if (window_seconds) {
    out += " against a window of " + FormatDuration(*window_seconds) +
           (fits_window ? " (fits)" : " -- NO PLAN FITS THE WINDOW");
  }
  out += "\n  probe and validation took " + FormatDuration(probe_seconds) + "\n";
  if (!rejected.empty()) out += "rejected alternatives:\n";
  for (const RejectedPlan& r : rejected) {
    out += "  " + Describe(r.plan) + ": " + r.reason + "\n";
  }
  return out;
}

}  // namespace trainerd
