// What a fused AdamW step could save (issue 16's third lever), measured before building one:
// on the job of --config under its plan, side by side in one process, interleaved over
// --rounds rounds:
//   - update: one Trainer::TrainUpdate (forward, backward, clip and the AdamW step);
//   - step: torch::optim::AdamW::step() alone, on the same parameters and gradients (what
//     the update runs: about ten elementwise passes per tensor, with temporaries);
//   - one_pass: the same arithmetic as one pass per tensor that reads parameter, gradient and
//     both moments and writes parameter and moments (at::parallel_for over the elements).
//     step and one_pass each work on their own copy of the parameters, with the update's
//     gradients; the largest difference between their first steps is printed, so the two
//     compute the same update.
// step / update bounds what any faster step can gain; (step - one_pass) / update is what
// this one would. Prints one JSON document.
//
//   build/bench/optimizer_bench [--config bench/gpt256.yaml] [--rounds 5] [--steps 20]
//                               [--precision fp32|bf16]
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "bench_flags.h"
#include "bench_job.h"
#include "trainerd/trainer/loop/trainer.h"

namespace {

double SecondsOf(const std::function<void()>& work) {
  const auto start = std::chrono::steady_clock::now();
  work();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// AdamW as torch::optim::AdamW computes it (decoupled weight decay, bias-corrected moments,
// eps added after the square root), in one pass over each tensor.
struct OnePassAdamW {
  std::vector<torch::Tensor> params, exp_avg, exp_avg_sq;
  double lr, beta1, beta2, eps, weight_decay;

  void Step(const std::vector<torch::Tensor>& grads, int step) {
    const auto b1 = static_cast<float>(beta1), b2 = static_cast<float>(beta2);
    const auto decay = static_cast<float>(1 - lr * weight_decay);
    const auto step_size = static_cast<float>(lr / (1 - std::pow(beta1, step)));
    const auto root_bc2 = static_cast<float>(std::sqrt(1 - std::pow(beta2, step)));
    const auto e = static_cast<float>(eps);
    for (std::size_t t = 0; t < params.size(); ++t) {
      float* p = params[t].data_ptr<float>();
      float* m = exp_avg[t].data_ptr<float>();
      float* v = exp_avg_sq[t].data_ptr<float>();
      const float* g = grads[t].data_ptr<float>();
      at::parallel_for(0, params[t].numel(), 1 << 14, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t i = begin; i < end; ++i) {
          m[i] = b1 * m[i] + (1 - b1) * g[i];
          v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
          p[i] = p[i] * decay - step_size * m[i] / (std::sqrt(v[i]) / root_bc2 + e);
        }
      });
    }
  }
};

std::vector<torch::Tensor> Clones(const std::vector<torch::Tensor>& tensors) {
  std::vector<torch::Tensor> out;
  for (const torch::Tensor& t : tensors) out.push_back(t.detach().clone());
  return out;
}

}  // namespace

int main(int argc, char** argv) {
#ifndef NDEBUG
  std::cerr << "optimizer_bench: WARNING: built without NDEBUG; figures are not representative\n";
#endif
  std::string config = "bench/gpt256.yaml", precision = "fp32";
  std::int64_t rounds = 5, steps = 20;
  if (!bench::ParseFlags(argc, argv, "optimizer_bench",
                         {{"--rounds", &rounds}, {"--steps", &steps}},
                         {{"--config", &config}, {"--precision", &precision}}) ||
      (precision != "fp32" && precision != "bf16") || rounds < 1 || steps < 1) {
    std::cerr << "usage: optimizer_bench [--config FILE] [--rounds N] [--steps N]"
                 " [--precision fp32|bf16] (N at least 1)\n";
    return 2;
  }
  int exit_code = 0;
  std::optional<bench::Job> loaded = bench::LoadJob(config, &exit_code);
  if (!loaded) return exit_code;
  trainerd::JobSpec* spec = &loaded->spec;
  const trainerd::Dataset* corpus = loaded->corpus.get();
  spec->plan.precision =
      precision == "bf16" ? trainerd::Precision::kBf16 : trainerd::Precision::kFp32;
  trainerd::ConfigureRuntime(spec->runtime);
  trainerd::NullEventSink discard;
  trainerd::Trainer trainer(*spec, *corpus, &discard);
  trainer.TrainUpdate(0);  // warm-up: gradients and AdamW state now exist
  const auto& options = static_cast<const torch::optim::AdamWOptions&>(
      trainer.model_state().optimizer().param_groups().front().options());
  // Both steps on their own copies of the trainer's parameters, with its gradients, from
  // fresh moments; the first step of each is compared.
  std::vector<torch::Tensor> grads, reference_params;
  std::int64_t elements = 0;
  for (const torch::Tensor& p : trainer.model_state().optimizer().param_groups().front().params()) {
    grads.push_back(p.grad().detach().clone());
    reference_params.push_back(p.detach().clone());
    reference_params.back().mutable_grad() = grads.back();
    elements += p.numel();
  }
  torch::optim::AdamW adamw(reference_params, options);
  auto zeros = [&] {
    std::vector<torch::Tensor> out;
    for (const torch::Tensor& g : grads) out.push_back(torch::zeros_like(g));
    return out;
  };
  OnePassAdamW one_pass{Clones(reference_params),
                        zeros(),
                        zeros(),
                        options.lr(),
                        std::get<0>(options.betas()),
                        std::get<1>(options.betas()),
                        options.eps(),
                        options.weight_decay()};
  adamw.step();
  one_pass.Step(grads, 1);
  double max_difference = 0;
  for (std::size_t t = 0; t < grads.size(); ++t) {
    max_difference = std::max(
        max_difference, (reference_params[t] - one_pass.params[t]).abs().max().item<double>());
  }

  std::vector<double> update_s, step_s, one_pass_s;
  for (int round = 0; round < rounds; ++round) {
    update_s.push_back(SecondsOf([&] { trainer.TrainUpdate(round + 1); }));
    std::vector<double> step_round, one_pass_round;
    for (int s = 0; s < steps; ++s) {
      step_round.push_back(SecondsOf([&] { adamw.step(); }));
      one_pass_round.push_back(SecondsOf([&] { one_pass.Step(grads, 2 + s); }));
    }
    step_s.push_back(bench::Median(step_round));
    one_pass_s.push_back(bench::Median(one_pass_round));
    std::cerr << "optimizer_bench: round " << round + 1 << ": update " << update_s.back() * 1e3
              << " ms, step " << step_s.back() * 1e3 << " ms, one pass " << one_pass_s.back() * 1e3
              << " ms\n";
  }
  const double update = bench::Median(update_s), step = bench::Median(step_s),
               one_pass_step = bench::Median(one_pass_s);
  const nlohmann::json report = {
      {"benchmark", "optimizer_step"},
      {"config", config},
      {"precision", precision},
      {"parameters", elements},
      {"tensors", grads.size()},
      {"threads", at::get_num_threads()},
      {"torch_version", TORCH_VERSION},
      {"method", "medians over " + std::to_string(rounds) + " rounds of one TrainUpdate and the " +
                     "median of " + std::to_string(steps) + " steps of each kind, interleaved"},
      {"update_ms", update * 1e3},
      {"adamw_step_ms", step * 1e3},
      {"one_pass_step_ms", one_pass_step * 1e3},
      {"one_pass_max_abs_difference", max_difference},
      {"step_share_of_update", step / update},
      {"one_pass_saving_share_of_update", (step - one_pass_step) / update},
  };
  std::cout << report.dump(2) << "\n";
  return 0;
}
