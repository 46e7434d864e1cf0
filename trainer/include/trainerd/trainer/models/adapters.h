// Low-rank adapters on a job's model (finetune: {method: lora}; docs/model-state.md): attached to
// the layers the job's targets name, with every other parameter frozen; their tensors by the
// `peft` package's names; merged into the weights for the release. The layers that take one:
// adaptable_linear.h.
#pragma once

#include <torch/nn/module.h>

#include <string>
#include <utility>
#include <vector>

#include "trainerd/common/status.h"
#include "trainerd/trainer/spec/job_spec.h"

namespace trainerd {

// What a job's targets may name: each layer that takes an adapter by the last part of its path
// (the last two where the last is an index, "mlp.0"), once each, in module order.
std::vector<std::string> AdaptableLayerNames(torch::nn::Module& model);

// Attaches an adapter per `spec.finetune` to every layer that takes one whose path a target
// names (the path itself, or its end after a "."; peft's target_modules rule), in module
// order, and freezes every other parameter; nothing for method: full. InvalidArgument naming
// the job file, finetune.targets and the target, with AdaptableLayerNames, for a target that
// names no such layer, or names a module that takes none (an LM head, a plugin's
// torch::nn::Linear). Call before the model's first forward, after its weights are loaded.
Status AttachAdapters(const JobSpec& spec, torch::nn::Module* model);

// The adapters' tensors by peft's names ("base_model.model.<layer path>.lora_A.weight"), in
// module order; empty without adapters.
std::vector<std::pair<std::string, torch::Tensor>> AdapterTensors(torch::nn::Module& model);

// Folds each adapter into its layer's weight and removes it (AdaptableLayer::MergeAdapter): the
// model's parameters are then the plain model's, which computes what the adapted one did.
void MergeAdapters(torch::nn::Module* model);

}  // namespace trainerd
