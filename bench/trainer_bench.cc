// Training-loop throughput for a job spec under named plans, measured side by side in one
// process: ms per optimizer update and tokens/s, then the ratios the plans are judged by.
//
//   build/bench/trainer_bench [--config configs/default.yaml] [--updates 20] [--warmup 3]
//
// Prints one JSON document. Update times come from the trainer's own per-update timing
// (wall clock around forward, backward, clip and step; CPU ops are synchronous); the median
// over --updates updates after --warmup warm-up updates of each scenario.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "trainerd/trainer/job_spec_parser.h"
#include "trainerd/trainer/text_corpus.h"
#include "trainerd/trainer/trainer.h"

namespace {

struct Scenario {
  std::string name;
  int threads;
  int microbatch_divisor;  // microbatch = effective batch / this
  enum { kNone, kHalf, kAll } checkpoint;
  trainerd::Precision precision;
};

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
#ifndef NDEBUG
  std::cerr << "trainer_bench: WARNING: built without NDEBUG; figures are not representative\n";
#endif
  std::string config = "configs/default.yaml";
  int updates = 20, warmup = 3;
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = i + 1 < argc ? argv[i] : "--help";
    if (flag == "--config") {
      config = argv[i + 1];
    } else if (flag == "--updates") {
      updates = std::stoi(argv[i + 1]);
    } else if (flag == "--warmup") {
      warmup = std::stoi(argv[i + 1]);
    } else {
      std::cerr << "usage: trainer_bench [--config FILE] [--updates N] [--warmup N]\n";
      return 2;
    }
  }
  trainerd::Result<trainerd::JobSpec> spec = trainerd::ParseJobSpecFile(config);
  if (!spec.ok()) {
    std::cerr << spec.status().message() << "\n";
    return 2;
  }
  trainerd::Result<trainerd::TextCorpus> corpus =
      trainerd::TextCorpus::Load(spec->data, spec->model.gpt.block_size);
  if (!corpus.ok()) {
    std::cerr << corpus.status().message() << "\n";
    return 3;
  }
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
      static_cast<double>(spec->training.effective_batch) * spec->model.gpt.block_size;
  spec->training.updates = warmup + updates;

  nlohmann::json results = nlohmann::json::object();
  std::map<std::string, double> seconds;
  for (const Scenario& s : scenarios) {
    trainerd::JobSpec job = *spec;
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
    std::vector<double> measured;
    for (int u = 0; u < job.training.updates; ++u) {
      const auto start = std::chrono::steady_clock::now();
      trainer.TrainUpdate(u);
      const double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (u >= warmup) measured.push_back(elapsed);
    }
    const double median = Median(measured);
    seconds[s.name] = median;
    results[s.name] = {{"threads", s.threads},
                       {"microbatch", job.plan.microbatch},
                       {"accumulation_steps", job.plan.accumulation_steps},
                       {"checkpointed_blocks", checkpointed},
                       {"precision", trainerd::ToString(s.precision)},
                       {"ms_per_update", median * 1e3},
                       {"tokens_per_second", tokens_per_update / median}};
    std::cerr << "trainer_bench: " << s.name << " " << median * 1e3 << " ms/update\n";
  }
  auto ratio = [&](const std::string& a, const std::string& b) { return seconds[a] / seconds[b]; };
  const nlohmann::json ratios = {
      {"threads2_speedup", ratio("fp32_1thread", "fp32")},
      {"fp32_checkpoint_all_time_ratio", ratio("fp32_checkpoint_all", "fp32")},
      {"bf16_checkpoint_all_time_ratio", ratio("bf16_checkpoint_all", "bf16")},
      {"bf16_tokens_per_second_ratio", ratio("fp32", "bf16")},
      {"fp32_accumulation4_time_ratio", ratio("fp32_accumulation4", "fp32")},
      {"bf16_accumulation4_time_ratio", ratio("bf16_accumulation4", "bf16")},
  };
  const nlohmann::json report = {
      {"benchmark", "trainer_plans"},
      {"config", config},
      {"effective_batch", spec->training.effective_batch},
      {"block_size", spec->model.gpt.block_size},
      {"blocks", blocks},
      {"torch_version", TORCH_VERSION},
      {"method", "median wall-clock seconds of Trainer::TrainUpdate over " +
                     std::to_string(updates) + " updates after " + std::to_string(warmup) +
                     " warm-up updates"},
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
