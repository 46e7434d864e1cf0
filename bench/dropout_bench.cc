// The cost of split-invariant dropout (sample_dropout.h), both ways of drawing its masks
// (stored: a Bernoulli draw per row, kept for backward; regenerated: counter-based, drawn
// again in backward), against LibTorch's dropout, side by side in one process on the tensors
// the bundled default job drops out (batch 32, block 128, width 128, 4 heads): forward (mask
// drawn and applied) plus backward, median of --repeats interleaved rounds.
//
//   build/bench/dropout_bench [--repeats 50] [--threads 2]
//
// Prints one JSON document: per shape the milliseconds of each, and their ratio.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "bench_flags.h"
#include "trainerd/trainer/device/machine.h"
#include "trainerd/trainer/loop/trainer.h"
#include "trainerd/trainer/semantics/sample_dropout.h"

namespace {

// One forward (mask drawn and applied) and backward, in milliseconds.
template <typename Dropout>
double Milliseconds(const torch::Tensor& x, Dropout& dropout) {
  const auto start = std::chrono::steady_clock::now();
  dropout(x).sum().backward();
  const std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - start;
  x.mutable_grad().reset();
  return took.count();
}

}  // namespace

int main(int argc, char** argv) {
  std::int64_t repeats = 50, threads = 2;
  if (!bench::ParseFlags(argc, argv, "dropout_bench",
                         {{"--repeats", &repeats}, {"--threads", &threads}})) {
    return 2;
  }
  trainerd::RuntimeSpec runtime;
  runtime.threads = static_cast<int>(threads);
  trainerd::ConfigureRuntime(runtime);  // the trainer's allocator settings, as in training
  trainerd::SampleDropout stored(0.1, /*site=*/3, trainerd::DropoutMasks::kStored);
  trainerd::SampleDropout regenerated(0.1, /*site=*/3, trainerd::DropoutMasks::kRegenerated);
  stored->train();
  regenerated->train();
  auto libtorch = [](const torch::Tensor& x) { return torch::dropout(x, 0.1, true); };
  auto split_invariant = [&](trainerd::SampleDropout& dropout) {
    return [&](const torch::Tensor& x) {
      const trainerd::SampleStreamScope stream(trainerd::SampleStream{1234, 64});
      return dropout->forward(x);
    };
  };
  auto stored_masks = split_invariant(stored);
  auto regenerated_masks = split_invariant(regenerated);
  nlohmann::json shapes = nlohmann::json::array();
  for (const std::vector<std::int64_t>& shape :
       {std::vector<std::int64_t>{32, 128, 128}, std::vector<std::int64_t>{32, 4, 128, 128}}) {
    const torch::Tensor x = torch::randn(shape, torch::requires_grad());
    // Interleaved, so that drift of the machine affects both alike; 3 warm-up rounds.
    std::vector<double> plain, kept, redrawn;
    for (int i = 0; i < repeats + 3; ++i) {
      const double a = Milliseconds(x, libtorch);
      const double b = Milliseconds(x, stored_masks);
      const double c = Milliseconds(x, regenerated_masks);
      if (i < 3) continue;
      plain.push_back(a);
      kept.push_back(b);
      redrawn.push_back(c);
    }
    shapes.push_back(
        {{"shape", shape},
         {"libtorch_dropout_ms", bench::Median(plain)},
         {"stored_masks_ms", bench::Median(kept)},
         {"regenerated_masks_ms", bench::Median(redrawn)},
         {"stored_over_libtorch", bench::Median(kept) / bench::Median(plain)},
         {"regenerated_over_libtorch", bench::Median(redrawn) / bench::Median(plain)}});
  }
  std::cout << nlohmann::json{{"benchmark", "dropout_bench"},
                              {"what", "forward + backward of dropout p=0.1, median ms"},
                              {"threads", threads},
                              {"repeats", repeats},
                              {"torch_version", TORCH_VERSION},
                              {"hardware", trainerd::HardwareFingerprint()},
                              {"shapes", shapes}}
                   .dump(2)
            << std::endl;
  return 0;
}
