// What keeping the optimizer state on the host (plan.optimizer_state: host,
// docs/model-state.md) saves and costs, on the job of --config under its plan: the state on
// the device and on the host in turn, over --rounds rounds. For each: the median update time
// and the device's and the host's peak bytes over an update (the host's: allocations inside a
// HostMemoryScope; on a CPU the device is the budgeted counting allocator). Prints one JSON
// document.
//
//   build/bench/model_state_bench [--config configs/default.yaml] [--rounds 7]
#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "bench_flags.h"
#include "bench_job.h"
#include "trainerd/common/median.h"
#include "trainerd/trainer/device/device_memory.h"
#include "trainerd/trainer/device/device_timer.h"
#include "trainerd/trainer/loop/trainer.h"

namespace {

struct Placement {
  explicit Placement(trainerd::StatePlacement placement) : where(placement) {}
  trainerd::StatePlacement where;
  std::vector<double> update_seconds;
  std::int64_t device_peak = 0, host_peak = 0;
};

}  // namespace

int main(int argc, char** argv) {
#ifndef NDEBUG
  std::cerr << "model_state_bench: WARNING: built without NDEBUG; figures are not representative\n";
#endif
  std::string config = "configs/default.yaml";
  std::int64_t rounds = 7;
  std::vector<char*> integer_flags = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--config" && i + 1 < argc) {
      config = argv[++i];
    } else {
      integer_flags.push_back(argv[i]);
    }
  }
  if (integer_flags.size() % 2 == 0 ||
      !bench::ParseIntegerFlags(static_cast<int>(integer_flags.size()), integer_flags.data(),
                                "model_state_bench", {{"--rounds", &rounds}}) ||
      rounds < 1) {
    std::cerr << "usage: model_state_bench [--config FILE] [--rounds N] (N at least 1)\n";
    return 2;
  }
  int exit_code = 0;
  std::optional<bench::Job> loaded = bench::LoadJob(config, &exit_code);
  if (!loaded) return exit_code;
  trainerd::ConfigureRuntime(loaded->spec.runtime);
  trainerd::NullEventSink discard;
  std::array<Placement, 2> placements = {Placement(trainerd::StatePlacement::kDevice),
                                         Placement(trainerd::StatePlacement::kHost)};
  // One trainer alive at a time, so that each peak is its own; built afresh every round,
  // warmed up (the optimizer state exists after the first update), then one update timed.
  for (int round = 0; round < rounds; ++round) {
    for (Placement& p : placements) {
      trainerd::JobSpec spec = loaded->spec;
      spec.plan.optimizer_state = p.where;
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
  for (const Placement& p : placements) {
    out[trainerd::ToString(p.where)] = {
        {"median_update_seconds", trainerd::Median(p.update_seconds)},
        {"device_peak_bytes", p.device_peak},
        {"host_peak_bytes", p.host_peak}};
  }
  out["host_over_device_update_time"] = trainerd::Median(placements[1].update_seconds) /
                                        trainerd::Median(placements[0].update_seconds);
  out["device_peak_saved_bytes"] = placements[0].device_peak - placements[1].device_peak;
  std::cout << out.dump(2) << std::endl;
  return 0;
}
