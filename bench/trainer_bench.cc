// Throughput of the training loop: ms per optimizer update and tokens/s for a job spec at
// fp32 with 1 and 2 intra-op threads, measured side by side in one process.
//
//   build/bench/trainer_bench [--config configs/default.yaml] [--updates 20] [--warmup 3]
//
// Prints one JSON document. Update times come from the trainer's own per-update timing
// (wall clock around forward, backward, clip and step; CPU ops are synchronous), with the
// first --warmup updates of each measurement excluded.
#include <torch/torch.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "trainerd/trainer/job_spec_parser.h"
#include "trainerd/trainer/text_corpus.h"
#include "trainerd/trainer/trainer.h"

namespace {

class UpdateTimes : public trainerd::EventSink {
 public:
  void Emit(const nlohmann::json& event) override {
    if (event["event"] == "update") seconds.push_back(event["update_seconds"]);
  }
  std::vector<double> seconds;
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
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--config")
      config = argv[i + 1];
    else if (flag == "--updates")
      updates = std::stoi(argv[i + 1]);
    else if (flag == "--warmup")
      warmup = std::stoi(argv[i + 1]);
    else {
      std::cerr << "usage: trainer_bench [--config FILE] [--updates N] [--warmup N]\n";
      return 2;
    }
  }
  trainerd::Result<trainerd::JobSpec> spec = trainerd::ParseJobSpecFile(config);
  if (!spec.ok()) {
    std::cerr << spec.status().message() << "\n";
    return 2;
  }
  spec->training.updates = warmup + updates;
  spec->training.eval_interval = spec->training.updates;
  spec->training.checkpoint_interval = spec->training.updates;
  trainerd::Result<trainerd::TextCorpus> corpus =
      trainerd::TextCorpus::Load(spec->data, spec->model.gpt.block_size);
  if (!corpus.ok()) {
    std::cerr << corpus.status().message() << "\n";
    return 3;
  }
  const std::filesystem::path scratch = std::filesystem::temp_directory_path() / "trainer_bench";
  std::filesystem::create_directories(scratch);

  nlohmann::json results = nlohmann::json::array();
  for (int threads : {1, 2}) {
    spec->runtime.threads = threads;
    trainerd::ConfigureThreads(spec->runtime);
    UpdateTimes times;
    trainerd::Trainer trainer(*spec, *corpus, &times);
    trainerd::TrainerOptions options;
    options.checkpoint_path = (scratch / "checkpoint.pt").string();
    options.model_path = (scratch / "model.pt").string();
    trainerd::Result<trainerd::TrainOutcome> outcome = trainer.Run(options);
    if (!outcome.ok()) {
      std::cerr << outcome.status().message() << "\n";
      return 1;
    }
    std::vector<double> measured(times.seconds.begin() + warmup, times.seconds.end());
    const double median = Median(measured);
    const double tokens =
        static_cast<double>(spec->training.effective_batch) * spec->model.gpt.block_size;
    results.push_back({{"threads", threads},
                       {"precision", "fp32"},
                       {"ms_per_update_median", median * 1e3},
                       {"tokens_per_second", tokens / median},
                       {"samples_per_second", spec->training.effective_batch / median},
                       {"updates_measured", measured.size()}});
  }
  std::filesystem::remove_all(scratch);
  nlohmann::json report = {
      {"benchmark", "trainer_update_throughput"},
      {"config", config},
      {"effective_batch", spec->training.effective_batch},
      {"block_size", spec->model.gpt.block_size},
      {"torch_version", TORCH_VERSION},
      {"method", "median wall-clock seconds per optimizer update after " + std::to_string(warmup) +
                     " warm-up updates"},
      {"results", results},
  };
  std::cout << report.dump(2) << "\n";
  return 0;
}
