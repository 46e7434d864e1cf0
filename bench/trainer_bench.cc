// Training-loop throughput for a job spec under named plans, measured side by side in one
// process: ms per optimizer update and tokens/s, then the ratios the plans are judged by.
//
//   build/bench/trainer_bench [--config configs/default.yaml] [--updates 20] [--warmup 3]
//                             [--scenarios fp32,bf16,...] [--kernels explicit,fused]
//                             [--rounds 1]
//
// --scenarios runs only the named scenarios (default: all). --kernels runs each scenario once
// per value of the GPT's model.kernels, one right after the other (side by side), names the
// results SCENARIO/KERNELS and adds each scenario's fused over explicit tokens/s ratio.
// --rounds N runs everything N times, the kernels in reverse order every other round, each
// median over the updates of all rounds. The first trainer of a process runs slower (seen:
// 4.2 s against 3.4 s per update): the first scenario runs once untimed before all.
// Prints one JSON document. Update times come from the trainer's own per-update timing
// (wall clock around forward, backward, clip and step; CPU ops are synchronous); the median
// over --updates updates after --warmup warm-up updates of each scenario.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bench_flags.h"
#include "bench_job.h"
#include "trainerd/trainer/loop/trainer.h"

namespace {

struct Scenario {
  std::string name;
  int threads;
  int microbatch_divisor;  // microbatch = effective batch / this
  enum { kNone, kHalf, kAll } checkpoint;
  trainerd::Precision precision;
};

}  // namespace

int main(int argc, char** argv) {
#ifndef NDEBUG
  std::cerr << "trainer_bench: WARNING: built without NDEBUG; figures are not representative\n";
#endif
  std::string config = "configs/default.yaml";
  int updates = 20, warmup = 3;
  std::vector<std::string> only;     // scenario names; empty: all
  std::vector<std::string> kernels;  // model.kernels values; empty: the config's
  int rounds = 1;
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = i + 1 < argc ? argv[i] : "--help";
    if (flag == "--config") {
      config = argv[i + 1];
    } else if (flag == "--updates") {
      updates = std::stoi(argv[i + 1]);
    } else if (flag == "--warmup") {
      warmup = std::stoi(argv[i + 1]);
    } else if (flag == "--scenarios") {
      only = bench::SplitList(argv[i + 1]);
    } else if (flag == "--kernels") {
      kernels = bench::SplitList(argv[i + 1]);
    } else if (flag == "--rounds") {
      rounds = std::stoi(argv[i + 1]);
    } else {
      std::cerr << "usage: trainer_bench [--config FILE] [--updates N] [--warmup N]"
                   " [--scenarios A,B] [--kernels explicit,fused] [--rounds N]\n";
      return 2;
    }
  }
  int exit_code = 0;
  std::optional<bench::Job> loaded = bench::LoadJob(config, &exit_code);
  if (!loaded) return exit_code;
  trainerd::JobSpec* spec = &loaded->spec;
  const trainerd::Dataset* corpus = loaded->corpus.get();
  using trainerd::Precision;
  const std::vector<Scenario> scenarios = {
      {"fp32_1thread", 1, 1, Scenario::kNone, Precision::kFp32},
      {"fp32", 2, 1, Scenario::kNone, Precision::kFp32},
      {"fp32_checkpoint_half", 2, 1, Scenario::kHalf, Precision::kFp32},
      {"fp32_checkpoint_all", 2, 1, Scenario::kAll, Precision::kFp32},
      {"fp32_accumulation4", 2, 4, Scenario::kNone, Precision::kFp32},
      {"bf16", 2, 1, Scenario::kNone, Precision::kBf16},
      {"bf16_checkpoint_half", 2, 1, Scenario::kHalf, Precision::kBf16},
      {"bf16_checkpoint_all", 2, 1, Scenario::kAll, Precision::kBf16},
      {"bf16_accumulation4", 2, 4, Scenario::kNone, Precision::kBf16},
  };
  const int blocks = trainerd::NumBlocks(spec->model);
  const double tokens_per_update =
      static_cast<double>(spec->training.effective_batch) * spec->model.block_size;
  spec->training.updates = warmup + updates;

  for (const std::string& k : kernels) {
    if (k != "fused" && k != "explicit") {
      std::cerr << "trainer_bench: --kernels: expected fused or explicit, got " << k << "\n";
      return 2;
    }
  }
  for (const std::string& name : only) {
    if (std::none_of(scenarios.begin(), scenarios.end(),
                     [&](const Scenario& s) { return s.name == name; })) {
      std::cerr << "trainer_bench: --scenarios: no scenario named " << name << "\n";
      return 2;
    }
  }
  // Each scenario under each kernel, one right after the other, in every round.
  std::vector<std::pair<Scenario, std::string>> runs;
  for (int round = 0; round < rounds; ++round) {
    for (const Scenario& s : scenarios) {
      if (!only.empty() && std::find(only.begin(), only.end(), s.name) == only.end()) continue;
      if (kernels.empty()) runs.emplace_back(s, "");
      for (std::size_t k = 0; k < kernels.size(); ++k) {
        runs.emplace_back(s, kernels[round % 2 == 0 ? k : kernels.size() - 1 - k]);
      }
    }
  }

  nlohmann::json results = nlohmann::json::object();
  std::map<std::string, double> seconds;
  std::map<std::string, std::vector<double>> measured;         // update seconds by name, all rounds
  if (!runs.empty()) runs.insert(runs.begin(), runs.front());  // the process's warm-up
  for (std::size_t run = 0; run < runs.size(); ++run) {
    const auto& [s, kernel] = runs[run];
    const std::string name = kernel.empty() ? s.name : s.name + "/" + kernel;
    trainerd::JobSpec job = *spec;
    if (!kernel.empty()) {
      job.model.options["kernels"] = kernel;
    }
    job.runtime.threads = s.threads;
    trainerd::ConfigureRuntime(job.runtime);
    job.plan.microbatch = job.training.effective_batch / s.microbatch_divisor;
    job.plan.accumulation_steps = s.microbatch_divisor;
    job.plan.precision = s.precision;
    job.plan.checkpoint_blocks.clear();
    const int checkpointed = s.checkpoint == Scenario::kAll    ? blocks
                             : s.checkpoint == Scenario::kHalf ? blocks / 2
                                                               : 0;
    for (int b = 0; b < checkpointed; ++b) job.plan.checkpoint_blocks.push_back(b);
    trainerd::NullEventSink discard;
    trainerd::Trainer trainer(job, *corpus, &discard);
    std::vector<double> times;
    for (int u = 0; u < job.training.updates; ++u) {
      const auto start = std::chrono::steady_clock::now();
      trainer.TrainUpdate(u);
      const double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (u >= warmup) times.push_back(elapsed);
    }
    if (run == 0) continue;
    measured[name].insert(measured[name].end(), times.begin(), times.end());
    const double median = bench::Median(measured[name]);
    seconds[name] = median;
    results[name] = {{"threads", s.threads},
                     {"microbatch", job.plan.microbatch},
                     {"accumulation_steps", job.plan.accumulation_steps},
                     {"checkpointed_blocks", checkpointed},
                     {"precision", trainerd::ToString(s.precision)},
                     {"ms_per_update", median * 1e3},
                     {"tokens_per_second", tokens_per_update / median}};
    std::cerr << "trainer_bench: " << name << " " << median * 1e3 << " ms/update\n";
  }
  // seconds[a] / seconds[b] for the ratios whose scenarios ran, under each kernel (the key
  // then ends in /KERNELS) or the config's; a fused over explicit tokens/s ratio per scenario
  // that ran under both.
  nlohmann::json ratios = nlohmann::json::object();
  std::vector<std::string> suffixes;
  for (const std::string& k : kernels) suffixes.push_back("/" + k);
  if (suffixes.empty()) suffixes.push_back("");
  auto ratio = [&](const std::string& key, const std::string& a, const std::string& b) {
    for (const std::string& suffix : suffixes) {
      if (seconds.count(a + suffix) && seconds.count(b + suffix)) {
        ratios[key + suffix] = seconds[a + suffix] / seconds[b + suffix];
      }
    }
  };
  ratio("threads2_speedup", "fp32_1thread", "fp32");
  ratio("fp32_checkpoint_all_time_ratio", "fp32_checkpoint_all", "fp32");
  ratio("bf16_checkpoint_all_time_ratio", "bf16_checkpoint_all", "bf16");
  ratio("bf16_tokens_per_second_ratio", "fp32", "bf16");
  ratio("fp32_accumulation4_time_ratio", "fp32_accumulation4", "fp32");
  ratio("bf16_accumulation4_time_ratio", "bf16_accumulation4", "bf16");
  for (const Scenario& s : scenarios) {
    if (seconds.count(s.name + "/fused") && seconds.count(s.name + "/explicit")) {
      ratios[s.name + "_fused_over_explicit_tokens_per_second"] =
          seconds[s.name + "/explicit"] / seconds[s.name + "/fused"];
    }
  }
  const nlohmann::json report = {
      {"benchmark", "trainer_plans"},
      {"config", config},
      {"effective_batch", spec->training.effective_batch},
      {"block_size", spec->model.block_size},
      {"blocks", blocks},
      {"torch_version", TORCH_VERSION},
      {"method", "median wall-clock seconds of Trainer::TrainUpdate over " +
                     std::to_string(updates) + " updates after " + std::to_string(warmup) +
                     " warm-up updates, in each of " + std::to_string(rounds) + " round(s)"},
      {"targets",
       {{"checkpoint_all_time_ratio_max", 1.4},
        {"bf16_tokens_per_second_ratio_min", 1.8},
        {"accumulation4_time_ratio_max", 1.1}}},
      {"scenarios", results},
      {"ratios", ratios},
  };
  std::cout << report.dump(2) << "\n";
  return 0;
}
