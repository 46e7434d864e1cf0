// What the levers on the model's own state (docs/model-state.md) save and cost, on the job of
// --config under its plan: the job as it is ("device"), with the optimizer state on the host
// (plan.optimizer_state: host, "host"), and as the job of rank-16 adapters on the layers
// --lora-targets names with the base frozen (finetune: {method: lora}, "adapters"), and the
// same with the frozen linear weights stored in bf16 ("adapters_bf16_base"), in turn, over
// --rounds rounds. For each: the median update time and the device's and the host's peak
// bytes over an update (the host's: allocations inside a HostMemoryScope; on a CPU the device
// is the budgeted counting allocator, simulating an accelerator: memory.simulated_device).
// Prints one JSON document.
//
//   build/bench/model_state_bench [--config configs/default.yaml] [--rounds 7]
//                                 [--lora-targets qkv,proj,mlp.0,mlp.2]
#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "bench_flags.h"
#include "bench_job.h"
#include "trainerd/common/median.h"
#include "trainerd/trainer/device/device_memory.h"
#include "trainerd/trainer/device/device_timer.h"
#include "trainerd/trainer/loop/trainer.h"

namespace {

struct Variant {
  explicit Variant(std::string variant) : name(std::move(variant)) {}
  std::string name;
  trainerd::StatePlacement where = trainerd::StatePlacement::kDevice;
  trainerd::FinetuneSpec finetune;
  std::vector<double> update_seconds;
  std::int64_t device_peak = 0, host_peak = 0;
};

}  // namespace

int main(int argc, char** argv) {
#ifndef NDEBUG
  std::cerr << "model_state_bench: WARNING: built without NDEBUG; figures are not representative\n";
#endif
  std::string config = "configs/default.yaml";
  std::string lora_targets = "qkv,proj,mlp.0,mlp.2";
  std::int64_t rounds = 7;
  if (!bench::ParseFlags(argc, argv, "model_state_bench", {{"--rounds", &rounds}},
                         {{"--config", &config}, {"--lora-targets", &lora_targets}}) ||
      rounds < 1) {
    std::cerr << "usage: model_state_bench [--config FILE] [--rounds N] [--lora-targets A,B] (N "
                 "at least 1)\n";
    return 2;
  }
  int exit_code = 0;
  std::optional<bench::Job> loaded = bench::LoadJob(config, &exit_code);
  if (!loaded) return exit_code;
  trainerd::ConfigureRuntime(loaded->spec.runtime);
  trainerd::NullEventSink discard;
  std::array<Variant, 4> variants = {Variant("device"), Variant("host"), Variant("adapters"),
                                     Variant("adapters_bf16_base")};
  variants[1].where = trainerd::StatePlacement::kHost;
  trainerd::FinetuneSpec lora = {trainerd::FinetuneMethod::kLora,
                                 /*rank=*/16,
                                 /*alpha=*/32,
                                 /*dropout=*/0,
                                 trainerd::Precision::kFp32,
                                 {}};
  std::stringstream list(lora_targets);
  for (std::string target; std::getline(list, target, ',');) lora.targets.push_back(target);
  variants[2].finetune = lora;
  variants[3].finetune = lora;
  variants[3].finetune.base_dtype = trainerd::Precision::kBf16;
  // One trainer alive at a time, so that each peak is its own; built afresh every round,
  // warmed up (the optimizer state exists after the first update), then one update timed.
  for (int round = 0; round < rounds; ++round) {
    for (Variant& p : variants) {
      trainerd::JobSpec spec = loaded->spec;
      spec.plan.optimizer_state = p.where;
      spec.finetune = p.finetune;
      // On a CPU the host is the device and the host's bytes would be the device's too: the
      // CPU simulates an accelerator here, so the bench measures what the lever moves off one.
      spec.memory.simulated_device = spec.runtime.device == "cpu";
      trainerd::Trainer trainer(spec, *loaded->corpus, &discard);
      for (int update = 0; update < 2; ++update) trainer.TrainUpdate(update);
      trainerd::DeviceMemory& device = trainerd::MemoryOf(trainer.device());
      trainerd::HostMemory& host = trainerd::HostMemoryOfProcess();
      device.ResetPeak();
      host.ResetPeak();
      const trainerd::DeviceTimer timer(trainer.device());
      trainer.TrainUpdate(2);
      p.update_seconds.push_back(timer.Seconds());
      p.device_peak = std::max(p.device_peak, device.peak_bytes());
      p.host_peak = std::max(p.host_peak, host.peak_bytes());
    }
  }
  nlohmann::json out = {{"config", config},
                        {"plan", trainerd::ToJson(loaded->spec.plan)},
                        {"rounds", rounds},
                        {"threads", torch::get_num_threads()},
                        {"torch", TORCH_VERSION}};
  for (const Variant& p : variants) {
    out[p.name] = {{"median_update_seconds", trainerd::Median(p.update_seconds)},
                   {"device_peak_bytes", p.device_peak},
                   {"host_peak_bytes", p.host_peak}};
  }
  out["adapter_targets"] = lora.targets;
  out["adapter_rank"] = lora.rank;
  for (std::size_t i = 1; i < variants.size(); ++i) {
    out[variants[i].name + "_over_device_update_time"] =
        trainerd::Median(variants[i].update_seconds) / trainerd::Median(variants[0].update_seconds);
    out[variants[i].name + "_device_peak_saved_bytes"] =
        variants[0].device_peak - variants[i].device_peak;
  }
  std::cout << out.dump(2) << std::endl;
  return 0;
}
