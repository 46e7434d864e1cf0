// The model the checkpoint harness loads into and its seed writer saves: the module tree of
// trainerd's smallest model (the `mlp` kind at one layer of one hidden unit, with BatchNorm:
// models/mlp/mlp_classifier.cc), built from LibTorch's own modules so that the harness needs
// the checkpoint reader and nothing else of the trainer. It has every kind of state a
// checkpoint holds (parameters, BatchNorm buffers, AdamW moments after one step), so that a
// seed stays a few KB.
#pragma once

#include <torch/torch.h>

#include <memory>

namespace trainerd::fuzz {

// The identity the seeds were written with; any other makes the loader stop early.
inline constexpr const char* kCheckpointIdentity = "fuzz-job";

// block0 = (Linear 256 -> 1, BatchNorm1d, GELU), head = Linear 1 -> 2: the names and shapes
// of the mlp kind's parameters and buffers.
struct CheckpointMlp : torch::nn::Module {
  CheckpointMlp() {
    block0 = register_module(
        "block0", torch::nn::Sequential(torch::nn::Linear(256, 1), torch::nn::BatchNorm1d(1),
                                        torch::nn::GELU()));
    head = register_module("head", torch::nn::Linear(1, 2));
  }
  torch::Tensor forward(const torch::Tensor& x) { return head->forward(block0->forward(x)); }
  torch::nn::Sequential block0{nullptr};
  torch::nn::Linear head{nullptr};
};

struct CheckpointModel {
  std::shared_ptr<CheckpointMlp> model;
  std::unique_ptr<torch::optim::AdamW> optimizer;
};

inline CheckpointModel BuildCheckpointModel(bool step) {
  torch::manual_seed(1);
  CheckpointModel m;
  m.model = std::make_shared<CheckpointMlp>();
  m.optimizer = std::make_unique<torch::optim::AdamW>(m.model->parameters(),
                                                      torch::optim::AdamWOptions(1e-3));
  if (step) {
    m.model->forward(torch::rand({4, 256})).square().mean().backward();
    m.optimizer->step();
  }
  return m;
}

}  // namespace trainerd::fuzz
