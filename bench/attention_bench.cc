// Causal attention with dropout 0.1 on its weights, forward plus backward, side by side in one
// process: the explicit formula (ExplicitCausalAttention with the regenerated dropout) against
// BlockwiseCausalAttention at several query rows per block, at issue 16's shape per microbatch
// (16 samples, 4 heads, 256 positions, 64 features per head), fp32 and bf16 (under autocast,
// as the trainer runs it). Median of --repeats interleaved rounds after 3 warm-up rounds.
//
//   build/bench/attention_bench [--repeats 20] [--threads 2] [--batch 16] [--block 256]
//
// Prints one JSON document: per dtype the milliseconds of each, and blockwise over explicit.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "bench_flags.h"
#include "models/gpt/blockwise_attention.h"
#include "models/gpt/gpt.h"
#include "trainerd/trainer/device/machine.h"
#include "trainerd/trainer/device/torch_compat.h"
#include "trainerd/trainer/loop/trainer.h"
#include "trainerd/trainer/semantics/sample_dropout.h"

namespace {

// One forward and backward, in milliseconds.
double Milliseconds(const std::vector<torch::Tensor>& qkv,
                    const std::function<torch::Tensor()>& attend) {
  const auto start = std::chrono::steady_clock::now();
  attend().sum().backward();
  const std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - start;
  for (const torch::Tensor& x : qkv) x.mutable_grad().reset();
  return took.count();
}

}  // namespace

int main(int argc, char** argv) {
  std::int64_t repeats = 20, threads = 2, batch = 16, block = 256;
  if (!bench::ParseFlags(argc, argv, "attention_bench",
                         {{"--repeats", &repeats},
                          {"--threads", &threads},
                          {"--batch", &batch},
                          {"--block", &block}})) {
    return 2;
  }
  trainerd::RuntimeSpec runtime;
  runtime.threads = static_cast<int>(threads);
  trainerd::ConfigureRuntime(runtime);  // the trainer's allocator settings, as in training
  trainerd::SampleDropout dropout(0.1, /*site=*/3, trainerd::DropoutMasks::kRegenerated);
  dropout->train();
  const std::vector<std::int64_t> rows_per_block = {32, 64, 128};
  nlohmann::json results = nlohmann::json::array();
  for (const torch::Dtype dtype : {torch::kFloat, torch::kBFloat16}) {
    const trainerd::compat::AutocastScope autocast(torch::kCPU,
                                                   {dtype == torch::kBFloat16, torch::kBFloat16});
    std::vector<torch::Tensor> qkv;
    for (int i = 0; i < 3; ++i) {
      qkv.push_back(torch::randn({batch, 4, block, 64}).to(dtype).requires_grad_());
    }
    const trainerd::SampleStreamScope stream(trainerd::SampleStream{1234, 64});
    std::vector<std::function<torch::Tensor()>> ways = {[&] {
      return trainerd::ExplicitCausalAttention(qkv[0], qkv[1], qkv[2], dropout)
          .transpose(1, 2)
          .contiguous();
    }};
    for (const std::int64_t rows : rows_per_block) {
      ways.emplace_back([&, rows] {
        return trainerd::BlockwiseCausalAttention(qkv[0], qkv[1], qkv[2], dropout->counters(),
                                                  /*first=*/{}, rows);
      });
    }
    // Interleaved, so that drift of the machine affects every way alike.
    std::vector<std::vector<double>> times(ways.size());
    for (int round = 0; round < repeats + 3; ++round) {
      for (std::size_t w = 0; w < ways.size(); ++w) {
        const double ms = Milliseconds(qkv, ways[w]);
        if (round >= 3) times[w].push_back(ms);
      }
    }
    nlohmann::json result = {{"dtype", dtype == torch::kFloat ? "fp32" : "bf16"},
                             {"explicit_ms", bench::Median(times[0])}};
    for (std::size_t r = 0; r < rows_per_block.size(); ++r) {
      const std::string name = "blockwise_rows" + std::to_string(rows_per_block[r]);
      result[name + "_ms"] = bench::Median(times[r + 1]);
      result[name + "_over_explicit_speed"] = bench::Median(times[0]) / bench::Median(times[r + 1]);
    }
    results.push_back(result);
  }
  std::cout << nlohmann::json{{"benchmark", "attention_bench"},
                              {"what",
                               "causal attention, dropout 0.1, forward + backward, median ms"},
                              {"shape", {batch, 4, block, 64}},
                              {"threads", threads},
                              {"repeats", repeats},
                              {"torch_version", TORCH_VERSION},
                              {"hardware", trainerd::HardwareFingerprint()},
                              {"results", results}}
                   .dump(2)
            << std::endl;
  return 0;
}
