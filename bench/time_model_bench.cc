// How far the planner's time model is off, lever by lever, on one job: the model the planner's
// own probes fit (PredictPlans), against real updates of a grid of plans.
//
//   build/bench/time_model_bench --config JOB.yaml [--rounds 3] [--updates 3] [--bf16 1]
//
// The grid, for the job's effective batch B (n/a rows left out where the model has no such
// plan, e.g. no blocks to checkpoint):
//   microbatch      fp32, nothing checkpointed, the state on the device: every power of two
//                   up to B, and B/3 rounded up (a last microbatch short); those of more than
//                   one microbatch per update count for "accumulation" too;
//   checkpointing   fp32, the first block of the ladder and every block, at B and B/4;
//   bf16            bf16 at B/4, nothing and every block checkpointed;
//   host state      fp32, the optimizer state on the host, at B and B/4.
// With --bf16 0 the job is fp32 alone (no bf16 probes or points: where bf16 has no hardware
// support an update of it takes 25 times fp32's). The job runs as a simulated device with a
// budget no plan fits, so that the planner weighs (and its probes measure) the host lever for
// every plan; every update is timed without a limit.
// Each of --rounds rounds fits the time model afresh (the planner's probes) and then measures
// every plan of the grid: build, one warm-up update, the fastest of --updates timed ones; the
// round's error of a plan is its prediction over its measurement less 1, and a plan's error is
// the median over the rounds. The machine's speed drifts by tens of percent over minutes on a
// shared VM: a prediction is held to measurements of the same minutes. Prints one JSON
// document: each point's predictions, measurements and error; per lever and over all points
// the median absolute and the worst error; and the noise (the median over points of the
// relative spread of its measurements between rounds).
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench_flags.h"
#include "bench_job.h"
#include "trainerd/trainer/device/device_timer.h"
#include "trainerd/trainer/loop/trainer.h"
#include "trainerd/trainer/plan/planner.h"
#include "trainerd/trainer/spec/plan_text.h"

namespace {

using trainerd::JobSpec;
using trainerd::PlanSpec;
using trainerd::Precision;
using trainerd::PredictedPlan;
using trainerd::StatePlacement;

struct Point {
  PlanSpec plan;
  std::vector<std::string> levers;
  std::vector<double> predicted_seconds = {}, measured_seconds = {};  // one per round
  std::vector<double> errors = {};
};

// The fastest of `updates` timed updates of `plan` after one warm-up update.
double TimeUpdates(const JobSpec& spec, const trainerd::Dataset& corpus, const PlanSpec& plan,
                   int updates) {
  JobSpec job = spec;
  job.plan = plan;
  trainerd::NullEventSink discard;
  trainerd::Trainer trainer(job, corpus, &discard);
  trainer.TrainUpdate(0);
  double fastest = INFINITY;
  for (int u = 1; u <= updates; ++u) {
    trainerd::DeviceTimer timer(trainer.device());
    trainer.TrainUpdate(u);
    fastest = std::min(fastest, timer.Seconds());
  }
  return fastest;
}

// The predicted plan of this shape among `plans` (no twin but the state's placement), or null.
const PredictedPlan* Find(const std::vector<PredictedPlan>& plans, int microbatch,
                          std::size_t checkpointed, Precision precision, StatePlacement placement) {
  for (const PredictedPlan& p : plans) {
    const PlanSpec& s = p.plan;
    if (s.microbatch == microbatch && s.checkpoint_blocks.size() == checkpointed &&
        s.precision == precision && s.optimizer_state == placement && !s.step_in_backward &&
        !s.offload_activations && s.zero_stage == 0) {
      return &p;
    }
  }
  return nullptr;
}

std::vector<Point> Grid(const std::vector<PredictedPlan>& plans, int batch, int blocks) {
  std::vector<Point> grid;
  const auto add = [&](int m, std::size_t k, Precision precision, StatePlacement placement,
                       std::vector<std::string> levers) {
    const PredictedPlan* p = Find(plans, m, k, precision, placement);
    if (!p) return;
    for (Point& g : grid) {
      if (g.plan == p->plan) {  // one plan, several levers
        g.levers.insert(g.levers.end(), levers.begin(), levers.end());
        return;
      }
    }
    grid.push_back({p->plan, std::move(levers)});
  };
  const auto fp32 = Precision::kFp32;
  const auto device = StatePlacement::kDevice;
  std::vector<int> sizes;
  for (int m = 1; m <= batch; m *= 2) sizes.push_back(m);
  if (sizes.back() != batch) sizes.push_back(batch);
  if (batch % 3 != 0 && batch > 3) sizes.push_back((batch + 2) / 3);
  for (int m : sizes) {
    std::vector<std::string> levers = {"microbatch"};
    if (m < batch) levers.push_back("accumulation");
    add(m, 0, fp32, device, levers);
  }
  const int quarter = std::max(1, batch / 4);
  for (int m : {batch, quarter}) {
    if (blocks > 0) {
      add(m, 1, fp32, device, {"checkpointing"});
      add(m, static_cast<std::size_t>(blocks), fp32, device, {"checkpointing"});
    }
    add(m, 0, fp32, StatePlacement::kHost, {"host state"});
  }
  add(quarter, 0, Precision::kBf16, device, {"bf16"});
  if (blocks > 0)
    add(quarter, static_cast<std::size_t>(blocks), Precision::kBf16, device, {"bf16"});
  return grid;
}

nlohmann::json ErrorSummary(std::vector<double> errors) {
  if (errors.empty()) return nullptr;
  for (double& e : errors) e = std::fabs(e);
  return {{"points", errors.size()},
          {"median_abs_error", bench::Median(errors)},
          {"worst_abs_error", *std::max_element(errors.begin(), errors.end())}};
}

}  // namespace

int main(int argc, char** argv) {
#ifndef NDEBUG
  std::cerr << "time_model_bench: WARNING: built without NDEBUG; figures are not representative\n";
#endif
  std::string config;
  std::int64_t rounds = 3, updates = 3, bf16 = 1;
  if (!bench::ParseFlags(argc, argv, "time_model_bench",
                         {{"--rounds", &rounds}, {"--updates", &updates}, {"--bf16", &bf16}},
                         {{"--config", &config}}) ||
      config.empty() || rounds < 1 || updates < 1) {
    std::cerr << "usage: time_model_bench --config JOB.yaml [--rounds N] [--updates N] "
                 "[--bf16 0|1] (N at least 1)\n";
    return 2;
  }
  int exit_code = 0;
  std::optional<bench::Job> job = bench::LoadJob(config, &exit_code);
  if (!job) return exit_code;
  JobSpec& spec = job->spec;
  trainerd::ConfigureRuntime(spec.runtime);
  spec.memory.simulated_device = true;
  spec.memory.budget_bytes = 1;
  spec.planner.precisions = {Precision::kFp32};
  if (bf16 != 0) spec.planner.precisions.push_back(Precision::kBf16);
  const int batch = spec.training.effective_batch;
  std::vector<Point> grid;
  for (int r = 0; r < rounds; ++r) {
    trainerd::Result<std::vector<PredictedPlan>> plans = trainerd::PredictPlans(spec, *job->corpus);
    if (!plans.ok()) {
      std::cerr << "time_model_bench: " << plans.status().message() << "\n";
      return 1;
    }
    if (grid.empty()) {
      int blocks = 0;
      for (const PredictedPlan& p : *plans) {
        blocks = std::max(blocks, static_cast<int>(p.plan.checkpoint_blocks.size()));
      }
      grid = Grid(*plans, batch, blocks);
    }
    for (Point& g : grid) {
      const PredictedPlan* p = Find(*plans, g.plan.microbatch, g.plan.checkpoint_blocks.size(),
                                    g.plan.precision, g.plan.optimizer_state);
      if (!p) continue;  // this round's probes left its precision out
      const double measured = TimeUpdates(spec, *job->corpus, g.plan, static_cast<int>(updates));
      g.predicted_seconds.push_back(p->update_seconds);
      g.measured_seconds.push_back(measured);
      g.errors.push_back(p->update_seconds / measured - 1);
    }
  }
  nlohmann::json points = nlohmann::json::array();
  std::map<std::string, std::vector<double>> by_lever;
  std::vector<double> all, spreads;
  for (const Point& g : grid) {
    const double error = bench::Median(g.errors);
    const auto [fastest, slowest] =
        std::minmax_element(g.measured_seconds.begin(), g.measured_seconds.end());
    spreads.push_back(*slowest / *fastest - 1);
    points.push_back({{"plan", trainerd::DescribePlan(g.plan)},
                      {"levers", g.levers},
                      {"predicted_update_seconds", g.predicted_seconds},
                      {"measured_update_seconds", g.measured_seconds},
                      {"errors", g.errors},
                      {"error", error}});
    for (const std::string& lever : g.levers) by_lever[lever].push_back(error);
    all.push_back(error);
  }
  nlohmann::json levers = nlohmann::json::object();
  for (const auto& [lever, errors] : by_lever) levers[lever] = ErrorSummary(errors);
  std::cout << nlohmann::json{{"config", config},
                              {"effective_batch", batch},
                              {"measurement_noise", spreads.empty() ? 0.0 : bench::Median(spreads)},
                              {"points", points},
                              {"levers", levers},
                              {"all", ErrorSummary(all)}}
                   .dump(2)
            << "\n";
  return 0;
}
