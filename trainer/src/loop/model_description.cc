#include "loop/model_description.h"

#include <torch/torch.h>

namespace trainerd {

nlohmann::json ModelConfigJson(const ModelSpec& spec) {
  nlohmann::json config = spec.options;
  config["kind"] = spec.kind;
  config["block_size"] = spec.block_size;
  config["inputs"] = ToString(spec.inputs);
  if (spec.loaded) {
    config["blocks"] = spec.loaded->blocks;
    if (!spec.loaded->file_sha256.empty()) config["sha256"] = spec.loaded->file_sha256;
  }
  config["loss"] = {{"kind", ToString(spec.loss.kind)}};
  if (spec.loss.kind == LossKind::kCrossEntropy) {
    config["loss"]["ignore_index"] = spec.loss.ignore_index;
  }
  return config;
}

nlohmann::json DescribeModel(const JobSpec& spec, const TrainableModel& model,
                             const std::string& job_identity, const std::string& data_fingerprint,
                             const nlohmann::json& files) {
  nlohmann::json tensors = nlohmann::json::array();
  for (const auto& [name, tensor] : model.StateDict()) {
    tensors.push_back({{"name", name},
                       {"shape", tensor.sizes().vec()},
                       {"dtype", std::string(c10::toString(tensor.scalar_type()))}});
  }
  nlohmann::json about = {{"model", ModelConfigJson(spec.model)},
                          {"parameters", CountParameters(model)},
                          {"tensors", tensors},
                          {"files", files},
                          {"job_identity", job_identity},
                          {"data_fingerprint", data_fingerprint},
                          {"torch_version", TORCH_VERSION}};
  // An adapter job's release: the merged model, and the adapter beside it.
  if (spec.finetune.method != FinetuneMethod::kFull) about["finetune"] = ToJson(spec.finetune);
  return about;
}

}  // namespace trainerd
