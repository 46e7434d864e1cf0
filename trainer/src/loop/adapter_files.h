// The adapter a LoRA job (finetune: {method: lora}) releases beside its merged model, as the
// `peft` package's save_pretrained writes one: adapter_config.json and
// adapter_model.safetensors, which PeftModel.from_pretrained loads onto the base model. They
// go in a folder of their own: beside the merged model, transformers (with peft installed)
// would take the release folder for the adapter and load the base model under it.
#pragma once

#include <torch/nn/module.h>

#include <string>
#include <vector>

#include "trainerd/common/status.h"
#include "trainerd/trainer/spec/job_spec.h"

namespace trainerd {

inline constexpr char kAdapterFolder[] = "adapter";
inline constexpr char kAdapterConfigFile[] = "adapter_config.json";
inline constexpr char kAdapterWeightsFile[] = "adapter_model.safetensors";

// Writes both into `dir`/adapter from the adapters on `model` (adapters.h), before they are
// merged, and returns their paths relative to `dir`; none for method: full.
Result<std::vector<std::string>> WriteAdapterFiles(const JobSpec& spec, torch::nn::Module& model,
                                                   const std::string& dir);

}  // namespace trainerd
