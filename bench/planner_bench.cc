// How good the planner's choice is, on (model size, budget, window) scenarios measured on
// this machine. For each scenario:
//   - the planner runs twice (probe, predict, screen, rounds): both choices, whether they
//     agree, and the search time against the window;
//   - the oracle grid: every precision, every accumulation step count of the effective batch
//     (its smallest microbatch: not only powers of two) and every checkpoint set of the
//     ladder (the first k blocks, k = 0..n_layer), each timed once under the usable limit;
//   - the final: the grid's --finalists fastest, both chosen plans and the "halve the
//     microbatch until it fits, fp32, no checkpointing" rule, timed in --rounds interleaved
//     rounds; the oracle is the fastest median there, chosen / oracle is its median over
//     the chosen plan's (throughput), and the noise is the median relative spread of a
//     plan's rounds.
//
//   build/bench/planner_bench [--scenarios a,b] [--rounds 5] [--finalists 5] [--updates 5]
//
// Prints one JSON document. A visit builds the trainer, runs one warm-up update and times
// --updates more under the usable memory limit: the fastest of them, as the planner does
// (interference only ever slows an update down).
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "bench_flags.h"
#include "trainerd/trainer/device/device_memory.h"
#include "trainerd/trainer/loop/trainer.h"
#include "trainerd/trainer/plan/plan_selection.h"
#include "trainerd/trainer/plan/planner.h"
#include "trainerd/trainer/spec/job_spec_parser.h"

namespace {

using trainerd::JobSpec;
using trainerd::PlanSpec;
using trainerd::Precision;

struct Scenario {
  std::string name;
  int n_layer, n_embd, effective_batch;
  std::int64_t budget_bytes;
  double window_seconds;
};

struct Visit {
  bool fits = false;
  double update_seconds = 0;
  std::int64_t peak_bytes = 0;
};

// One visit of `plan`: build, one warm-up update, the fastest of `updates` timed ones under
// the usable limit (the fastest); fits=false on OOM or a peak above usable.
Visit Time(const JobSpec& spec, const trainerd::Dataset& corpus, const PlanSpec& plan,
           int updates) {
  JobSpec job = spec;
  job.plan = plan;
  trainerd::NullEventSink discard;
  Visit result;
  try {
    trainerd::Trainer trainer(job, corpus, &discard);
    trainerd::DeviceMemory& memory = trainerd::MemoryOf(trainer.device());
    trainerd::ScopedMemoryLimit limit(memory, spec.memory.usable_bytes());
    trainer.TrainUpdate(0);
    memory.ResetPeak();
    result.update_seconds = INFINITY;
    for (int u = 1; u <= updates; ++u) {
      const auto start = std::chrono::steady_clock::now();
      trainer.TrainUpdate(u);
      result.update_seconds =
          std::min(result.update_seconds,
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    result.peak_bytes = memory.peak_bytes();
    result.fits = result.peak_bytes <= spec.memory.usable_bytes();
  } catch (const c10::OutOfMemoryError&) {
    result.fits = false;
  }
  return result;
}

PlanSpec Plan(const JobSpec& spec, int microbatch, int checkpointed, Precision precision) {
  PlanSpec plan;
  plan.microbatch = microbatch;
  plan.accumulation_steps = (spec.training.effective_batch + microbatch - 1) / microbatch;
  for (int b = 0; b < checkpointed; ++b) plan.checkpoint_blocks.push_back(b);
  plan.precision = precision;
  return plan;
}

// Blocks of the built-in GPT are identical: a plan is its microbatch, how many blocks are
// checkpointed (not which) and its precision.
bool SameShape(const PlanSpec& a, const PlanSpec& b) {
  return a.microbatch == b.microbatch && a.precision == b.precision &&
         a.checkpoint_blocks.size() == b.checkpoint_blocks.size();
}

nlohmann::json PlanJson(const PlanSpec& p) {
  return {{"microbatch", p.microbatch},
          {"accumulation_steps", p.accumulation_steps},
          {"checkpointed_blocks", p.checkpoint_blocks.size()},
          {"precision", trainerd::ToString(p.precision)}};
}

// The smallest microbatch of each accumulation step count: 32 -> 32, 16, 11, 8, 7, 6, 5, 4,
// 3, 2, 1.
std::vector<int> MicrobatchPerStepCount(int effective_batch) {
  std::vector<int> sizes;
  for (int steps = 1; steps <= effective_batch; ++steps) {
    const int m = (effective_batch + steps - 1) / steps;
    if (sizes.empty() || sizes.back() != m) sizes.push_back(m);
  }
  return sizes;
}

struct Screened {
  PlanSpec plan;
  double update_seconds;
};

std::vector<Screened> ScreenGrid(const JobSpec& spec, const trainerd::Dataset& corpus, int n_layer,
                                 int updates) {
  std::vector<Screened> fitting;
  for (Precision p : spec.planner.precisions) {
    for (int m : MicrobatchPerStepCount(spec.training.effective_batch)) {
      for (int k = 0; k <= n_layer; ++k) {
        const PlanSpec plan = Plan(spec, m, k, p);
        const Visit v = Time(spec, corpus, plan, updates);
        if (v.fits) fitting.push_back({plan, v.update_seconds});
      }
    }
  }
  std::sort(fitting.begin(), fitting.end(), [](const Screened& a, const Screened& b) {
    return a.update_seconds < b.update_seconds;
  });
  return fitting;
}

// The position of `plan` in `plans`, added (with no timings) when it is not there yet.
std::size_t FindOrAdd(std::vector<trainerd::TimedPlan>* plans, const PlanSpec& plan) {
  for (std::size_t i = 0; i < plans->size(); ++i) {
    if (SameShape((*plans)[i].plan, plan)) return i;
  }
  plans->push_back({plan, {}});
  return plans->size() - 1;
}

nlohmann::json RunScenario(const JobSpec& base, const Scenario& s, int rounds, int finalists,
                           int updates) {
  JobSpec spec = base;
  spec.model.options["n_layer"] = s.n_layer;
  spec.model.options["n_embd"] = s.n_embd;
  spec.training.effective_batch = s.effective_batch;
  spec.memory.budget_bytes = s.budget_bytes;
  spec.window_seconds = s.window_seconds;
  trainerd::Result<std::unique_ptr<trainerd::Dataset>> corpus =
      trainerd::LoadDataset(spec.data, spec.model.block_size, "");
  if (!corpus.ok()) return {{"scenario", s.name}, {"error", corpus.status().message()}};
  std::vector<trainerd::ChosenPlan> choices;
  for (int i = 0; i < 2; ++i) {
    trainerd::Result<trainerd::ChosenPlan> chosen = trainerd::PlanJob(spec, **corpus);
    if (!chosen.ok()) return {{"scenario", s.name}, {"error", chosen.status().message()}};
    choices.push_back(*chosen);
  }
  const std::vector<Screened> grid = ScreenGrid(spec, **corpus, s.n_layer, updates);
  if (grid.empty()) return {{"scenario", s.name}, {"error", "no grid plan fits"}};

  std::vector<trainerd::TimedPlan> final_plans;
  for (std::size_t i = 0; i < grid.size() && static_cast<int>(i) < finalists; ++i) {
    FindOrAdd(&final_plans, grid[i].plan);
  }
  const std::size_t chosen[2] = {FindOrAdd(&final_plans, choices[0].plan),
                                 FindOrAdd(&final_plans, choices[1].plan)};
  std::optional<std::size_t> rule;
  for (int m = s.effective_batch; m >= 1 && !rule; m /= 2) {
    const PlanSpec plan = Plan(spec, m, 0, Precision::kFp32);
    for (const Screened& g : grid) {
      if (SameShape(g.plan, plan)) rule = FindOrAdd(&final_plans, plan);
    }
  }
  for (int r = 0; r < rounds; ++r) {
    for (trainerd::TimedPlan& t : final_plans) {
      const Visit v = Time(spec, **corpus, t.plan, updates);
      t.update_seconds.push_back(v.fits ? v.update_seconds : INFINITY);
    }
  }
  std::size_t oracle = 0;
  for (std::size_t i = 0; i < final_plans.size(); ++i) {
    if (final_plans[i].MedianSeconds() < final_plans[oracle].MedianSeconds()) oracle = i;
  }
  const double oracle_seconds = final_plans[oracle].MedianSeconds();
  nlohmann::json timed = nlohmann::json::array();
  for (const trainerd::TimedPlan& t : final_plans) {
    nlohmann::json entry = PlanJson(t.plan);
    entry["update_seconds"] = t.update_seconds;  // one per round
    entry["median_update_seconds"] = t.MedianSeconds();
    entry["over_oracle_throughput"] = oracle_seconds / t.MedianSeconds();
    timed.push_back(entry);
  }
  const trainerd::ChosenPlan& first = choices[0];
  nlohmann::json row = {
      {"scenario", s.name},
      {"n_layer", s.n_layer},
      {"n_embd", s.n_embd},
      {"effective_batch", s.effective_batch},
      {"budget_bytes", s.budget_bytes},
      {"usable_bytes", spec.memory.usable_bytes()},
      {"grid_plans_fitting", grid.size()},
      {"chosen", {PlanJson(choices[0].plan), PlanJson(choices[1].plan)}},
      {"choice_stable", SameShape(choices[0].plan, choices[1].plan)},
      {"chosen_over_oracle_throughput",
       {oracle_seconds / final_plans[chosen[0]].MedianSeconds(),
        oracle_seconds / final_plans[chosen[1]].MedianSeconds()}},
      {"oracle", PlanJson(final_plans[oracle].plan)},
      {"oracle_update_seconds", oracle_seconds},
      {"final_noise", trainerd::RepeatedTimingNoise(final_plans)},
      {"planner_noise", {choices[0].selection.noise, choices[1].selection.noise}},
      {"predicted_peak_bytes", first.predicted_peak_bytes},
      {"measured_peak_bytes", first.measured_peak_bytes},
      {"peak_prediction_error",
       std::fabs(static_cast<double>(first.predicted_peak_bytes - first.measured_peak_bytes)) /
           static_cast<double>(first.measured_peak_bytes)},
      {"search_seconds", {choices[0].probe_seconds, choices[1].probe_seconds}},
      {"search_fraction_of_window",
       std::max(choices[0].probe_seconds, choices[1].probe_seconds) / s.window_seconds},
      {"final", timed},
  };
  if (rule) {
    row["halving_rule"] = PlanJson(final_plans[*rule].plan);
    row["chosen_over_halving_rule_throughput"] =
        final_plans[*rule].MedianSeconds() / final_plans[chosen[0]].MedianSeconds();
  } else {
    row["halving_rule"] = "does not fit at microbatch 1 without checkpointing";
  }
  return row;
}

}  // namespace

int main(int argc, char** argv) {
#ifndef NDEBUG
  std::cerr << "planner_bench: WARNING: built without NDEBUG; figures are not representative\n";
#endif
  std::int64_t rounds = 5, finalists = 5, updates = 5;
  std::string names;
  if (!bench::ParseFlags(
          argc, argv, "planner_bench",
          {{"--rounds", &rounds}, {"--finalists", &finalists}, {"--updates", &updates}},
          {{"--scenarios", &names}}) ||
      rounds < 1 || finalists < 1 || updates < 1) {
    std::cerr << "usage: planner_bench [--scenarios a,b] [--rounds N] [--finalists N] "
                 "[--updates N] (N at least 1)\n";
    return 2;
  }
  const std::vector<std::string> only = bench::SplitList(names);
  trainerd::Result<JobSpec> base = trainerd::ParseJobSpecFile("configs/default.yaml");
  if (!base.ok()) {
    std::cerr << base.status().message() << " (run from the source tree)\n";
    return 2;
  }
  base->runtime.threads = 0;
  trainerd::ConfigureRuntime(base->runtime);
  const std::vector<Scenario> scenarios = {
      {"default_roomy", 4, 128, 32, 1LL << 30, 6 * 3600},
      {"default_job", 4, 128, 32, 64LL << 20, 6 * 3600},  // configs/default.yaml's budget
      {"default_very_tight", 4, 128, 32, 40LL << 20, 6 * 3600},
      {"wide_tight", 4, 256, 32, 150LL << 20, 2 * 3600},
      {"deep_tight", 8, 128, 32, 120LL << 20, 2 * 3600},
  };
  nlohmann::json rows = nlohmann::json::array();
  double worst = INFINITY;
  for (const Scenario& s : scenarios) {
    if (!only.empty() && std::find(only.begin(), only.end(), s.name) == only.end()) continue;
    nlohmann::json row = RunScenario(*base, s, static_cast<int>(rounds),
                                     static_cast<int>(finalists), static_cast<int>(updates));
    if (row.contains("chosen_over_oracle_throughput")) {
      for (double ratio : row["chosen_over_oracle_throughput"]) worst = std::min(worst, ratio);
    }
    std::cerr << "planner_bench: " << row.dump() << "\n";
    rows.push_back(row);
  }
  const nlohmann::json report = {
      {"benchmark", "planner"},
      {"method", "per visit: build, one warm-up update, fastest of " + std::to_string(updates) +
                     " timed update(s) under the scenario's usable limit; the final: " +
                     std::to_string(rounds) + " interleaved rounds, median per plan"},
      {"targets", {{"chosen_over_oracle_min", 0.97}, {"search_fraction_of_window_max", 0.02}}},
      {"chosen_over_oracle_worst", std::isfinite(worst) ? nlohmann::json(worst) : nullptr},
      {"scenarios", rows},
  };
  std::cout << report.dump(2) << "\n";
  return 0;
}
