// The model the checkpoint harness loads into and its seed writer saves: the smallest real
// trainerd model with every kind of state a checkpoint holds (parameters, BatchNorm buffers,
// AdamW moments after one step), so that a seed stays a few KB.
#pragma once

#include <torch/torch.h>

#include <memory>

#include "models/mlp/mlp_spec.h"
#include "trainerd/trainer/models/build_model.h"

namespace trainerd::fuzz {

// The identity the seeds were written with; any other makes the loader stop early.
inline constexpr const char* kCheckpointIdentity = "fuzz-job";

struct CheckpointModel {
  std::shared_ptr<TrainableModel> model;
  std::unique_ptr<torch::optim::AdamW> optimizer;
};

// An MLP classifier over 256 byte features: one hidden layer of 1 unit with BatchNorm, two
// classes, and its AdamW. `step`: take one optimizer step so that AdamW has state.
inline CheckpointModel BuildCheckpointModel(bool step) {
  torch::manual_seed(1);
  MlpOptions mlp;
  mlp.hidden = 1;
  mlp.layers = 1;
  mlp.batch_norm = true;
  CheckpointModel m;
  m.model = BuildModel(MlpModelSpec(mlp), /*classes=*/2, "fuzz");
  m.optimizer = std::make_unique<torch::optim::AdamW>(m.model->parameters(),
                                                      torch::optim::AdamWOptions(1e-3));
  if (step) {
    m.model->forward(torch::rand({4, 256})).square().mean().backward();
    m.optimizer->step();
  }
  return m;
}

}  // namespace trainerd::fuzz
