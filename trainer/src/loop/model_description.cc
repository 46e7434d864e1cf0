#include "loop/model_description.h"

#include <torch/torch.h>

namespace trainerd {

nlohmann::json ModelConfigJson(const ModelSpec& spec) {
  nlohmann::json config = {{"kind", ToString(spec.kind)}};
  switch (spec.kind) {
    case ModelKind::kGpt:
      config.update({{"n_layer", spec.gpt.n_layer},
                     {"n_head", spec.gpt.n_head},
                     {"n_embd", spec.gpt.n_embd},
                     {"block_size", spec.gpt.block_size},
                     {"vocab_size", spec.gpt.vocab_size},
                     {"dropout", spec.gpt.dropout},
                     {"bias", spec.gpt.bias}});
      break;
    case ModelKind::kMlpClassifier:
      config.update({{"hidden", spec.mlp.hidden},
                     {"layers", spec.mlp.layers},
                     {"batch_norm", spec.mlp.batch_norm},
                     {"dropout", spec.mlp.dropout},
                     {"block_size", spec.gpt.block_size}});
      break;
    case ModelKind::kTorchScript:
      config.update({{"path", spec.torchscript.path},
                     {"sha256", spec.own.sha256},
                     {"inputs", ToString(spec.own.inputs)},
                     {"blocks", spec.own.num_blocks},
                     {"block_size", spec.gpt.block_size}});
      break;
    case ModelKind::kPlugin:
      config.update({{"library", spec.plugin.library},
                     {"name", spec.plugin.name},
                     {"options", spec.plugin.options},
                     {"sha256", spec.own.sha256},
                     {"inputs", ToString(spec.own.inputs)},
                     {"blocks", spec.own.num_blocks},
                     {"block_size", spec.gpt.block_size}});
      break;
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
  return {{"model", ModelConfigJson(spec.model)},
          {"parameters", CountParameters(model)},
          {"tensors", tensors},
          {"files", files},
          {"job_identity", job_identity},
          {"data_fingerprint", data_fingerprint},
          {"torch_version", TORCH_VERSION}};
}

}  // namespace trainerd
