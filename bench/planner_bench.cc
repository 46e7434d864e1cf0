// How good the planner's choice is, on (model size, budget, window) scenarios measured on
// this machine. For each scenario:
//   - the planner's chosen plan (probe + predict + validate), its probe time;
//   - the oracle: the fastest plan found by measuring every candidate of a grid
//     (microbatch in powers of two, 0 / half / all blocks checkpointed, each allowed
//     precision) under the usable limit;
//   - the rule "halve the microbatch until it fits, no checkpointing, fp32";
//   - throughput of chosen / oracle and chosen / rule, predicted vs measured peak.
//
//   build/bench/planner_bench [--updates 5]
//
// Prints one JSON document. Update times: median of --updates measured updates after two
// warm-up updates, under the scenario's usable memory limit.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "trainerd/trainer/device_memory.h"
#include "trainerd/trainer/job_spec_parser.h"
#include "trainerd/trainer/planner.h"
#include "trainerd/trainer/text_corpus.h"
#include "trainerd/trainer/trainer.h"

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

struct Measured {
  bool fits = false;
  double update_seconds = 0;
  std::int64_t peak_bytes = 0;
};

// Median update time and peak of `plan` under the usable limit; fits=false on OOM or peak
// above usable.
Measured Measure(const JobSpec& spec, const trainerd::Dataset& corpus, const PlanSpec& plan,
                 int updates) {
  JobSpec job = spec;
  job.plan = plan;
  trainerd::NullEventSink discard;
  Measured result;
  try {
    trainerd::Trainer trainer(job, corpus, &discard);
    trainerd::DeviceMemory& memory = trainerd::MemoryOf(trainer.device());
    trainerd::ScopedMemoryLimit limit(memory, spec.memory.usable_bytes());
    trainer.TrainUpdate(0);  // two warm-up updates: allocation, first-touch page faults
    trainer.TrainUpdate(1);
    memory.ResetPeak();
    std::vector<double> times;
    for (int u = 2; u < 2 + updates; ++u) {
      const auto start = std::chrono::steady_clock::now();
      trainer.TrainUpdate(u);
      times.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    std::sort(times.begin(), times.end());
    result.update_seconds = times[times.size() / 2];
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

nlohmann::json PlanJson(const PlanSpec& p) {
  return {{"microbatch", p.microbatch},
          {"checkpointed_blocks", p.checkpoint_blocks.size()},
          {"precision", trainerd::ToString(p.precision)}};
}

}  // namespace

int main(int argc, char** argv) {
#ifndef NDEBUG
  std::cerr << "planner_bench: WARNING: built without NDEBUG; figures are not representative\n";
#endif
  int updates = 5;
  if (argc == 3 && std::string(argv[1]) == "--updates") updates = std::stoi(argv[2]);
  trainerd::Result<JobSpec> base = trainerd::ParseJobSpecFile("configs/default.yaml");
  if (!base.ok()) {
    std::cerr << base.status().message() << " (run from the source tree)\n";
    return 2;
  }
  base->runtime.threads = 0;
  trainerd::ConfigureRuntime(base->runtime);
  const std::vector<Scenario> scenarios = {
      {"default_roomy", 4, 128, 32, 1LL << 30, 6 * 3600},
      {"default_tight", 4, 128, 32, 100LL << 20, 6 * 3600},
      {"default_very_tight", 4, 128, 32, 40LL << 20, 6 * 3600},
      {"wide_tight", 4, 256, 32, 150LL << 20, 2 * 3600},
      {"deep_tight", 8, 128, 32, 120LL << 20, 2 * 3600},
  };
  nlohmann::json rows = nlohmann::json::array();
  std::vector<double> ratios_oracle;
  int exceeded = 0;
  for (const Scenario& s : scenarios) {
    JobSpec spec = *base;
    spec.model.gpt.n_layer = s.n_layer;
    spec.model.gpt.n_embd = s.n_embd;
    spec.training.effective_batch = s.effective_batch;
    spec.memory.budget_bytes = s.budget_bytes;
    spec.window_seconds = s.window_seconds;
    trainerd::Result<trainerd::TextCorpus> corpus =
        trainerd::TextCorpus::Load(spec.data, spec.model.gpt.block_size);
    if (!corpus.ok()) {
      std::cerr << corpus.status().message() << "\n";
      return 3;
    }
    trainerd::Result<trainerd::ChosenPlan> chosen = trainerd::PlanJob(spec, *corpus);
    if (!chosen.ok()) {
      rows.push_back({{"scenario", s.name}, {"error", chosen.status().message()}});
      continue;
    }
    const Measured chosen_measured = Measure(spec, *corpus, chosen->plan, updates);
    if (!chosen_measured.fits) ++exceeded;

    std::optional<std::pair<PlanSpec, Measured>> oracle;
    for (Precision p : spec.planner.precisions) {
      for (int m = 1; m <= s.effective_batch; m *= 2) {
        for (int k : {0, s.n_layer / 2, s.n_layer}) {
          const PlanSpec plan = Plan(spec, m, k, p);
          const Measured measured = Measure(spec, *corpus, plan, updates);
          if (measured.fits &&
              (!oracle || measured.update_seconds < oracle->second.update_seconds)) {
            oracle = {plan, measured};
          }
        }
      }
    }
    std::optional<std::pair<PlanSpec, Measured>> rule;
    for (int m = s.effective_batch; m >= 1 && !rule; m /= 2) {
      const PlanSpec plan = Plan(spec, m, 0, Precision::kFp32);
      const Measured measured = Measure(spec, *corpus, plan, updates);
      if (measured.fits) rule = {plan, measured};
    }
    nlohmann::json row = {
        {"scenario", s.name},
        {"n_layer", s.n_layer},
        {"n_embd", s.n_embd},
        {"budget_bytes", s.budget_bytes},
        {"usable_bytes", spec.memory.usable_bytes()},
        {"chosen", PlanJson(chosen->plan)},
        {"chosen_update_seconds", chosen_measured.update_seconds},
        {"chosen_fits", chosen_measured.fits},
        {"predicted_peak_bytes", chosen->predicted_peak_bytes},
        {"measured_peak_bytes", chosen->measured_peak_bytes},
        {"peak_prediction_error", std::fabs(static_cast<double>(chosen->predicted_peak_bytes -
                                                                chosen->measured_peak_bytes)) /
                                      static_cast<double>(chosen->measured_peak_bytes)},
        {"probe_seconds", chosen->probe_seconds},
        {"probe_fraction_of_job", chosen->probe_seconds / chosen->predicted_duration_seconds},
    };
    if (oracle) {
      const double ratio = oracle->second.update_seconds / chosen_measured.update_seconds;
      ratios_oracle.push_back(ratio);
      row["oracle"] = PlanJson(oracle->first);
      row["oracle_update_seconds"] = oracle->second.update_seconds;
      row["chosen_over_oracle_throughput"] = ratio;
    }
    if (rule) {
      row["halving_rule"] = PlanJson(rule->first);
      row["chosen_over_halving_rule_throughput"] =
          rule->second.update_seconds / chosen_measured.update_seconds;
    } else {
      row["halving_rule"] = "does not fit at microbatch 1 without checkpointing";
    }
    std::cerr << "planner_bench: " << row.dump() << "\n";
    rows.push_back(row);
  }
  std::sort(ratios_oracle.begin(), ratios_oracle.end());
  const nlohmann::json report = {
      {"benchmark", "planner"},
      {"method", "median of " + std::to_string(updates) +
                     " measured updates after two warm-up updates, under each scenario's usable "
                     "limit"},
      {"targets",
       {{"chosen_over_oracle_median_min", 0.95},
        {"plans_exceeding_usable", 0},
        {"peak_prediction_error_max", 0.10}}},
      {"chosen_over_oracle_median", ratios_oracle.empty()
                                        ? nlohmann::json(nullptr)
                                        : nlohmann::json(ratios_oracle[ratios_oracle.size() / 2])},
      {"plans_exceeding_usable", exceeded},
      {"scenarios", rows},
  };
  std::cout << report.dump(2) << "\n";
  return 0;
}
