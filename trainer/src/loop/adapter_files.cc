#include "loop/adapter_files.h"

#include <torch/torch.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "loop/safetensors_writer.h"
#include "trainerd/common/atomic_file.h"
#include "trainerd/trainer/models/adaptable_linear.h"
#include "trainerd/trainer/models/adapters.h"

namespace trainerd {

Result<std::vector<std::string>> WriteAdapterFiles(const JobSpec& spec, torch::nn::Module& model,
                                                   const std::string& dir) {
  const FinetuneSpec& f = spec.finetune;
  if (f.method != FinetuneMethod::kLora) return std::vector<std::string>{};
  bool fan_in_fan_out = false;
  for (const auto& item : model.named_modules()) {
    const auto* layer = dynamic_cast<AdaptableLayer*>(item.value().get());
    if (layer != nullptr && layer->has_adapter()) fan_in_fan_out |= layer->fan_in_fan_out();
  }
  const std::string base =
      spec.model.kind == "hf" ? spec.model.options.value("path", std::string()) : std::string();
  const nlohmann::json config = {
      {"peft_type", "LORA"},
      {"task_type", spec.model.inputs == ModelInputs::kTokens ? nlohmann::json("CAUSAL_LM")
                                                              : nlohmann::json(nullptr)},
      {"base_model_name_or_path", base.empty() ? nlohmann::json(nullptr) : nlohmann::json(base)},
      {"r", f.rank},
      {"lora_alpha", f.alpha},
      {"lora_dropout", f.dropout},
      {"target_modules", f.targets},
      {"fan_in_fan_out", fan_in_fan_out},
      {"bias", "none"},
      {"init_lora_weights", true},
      {"inference_mode", true},
      {"modules_to_save", nullptr},
      {"use_rslora", false},
      {"use_dora", false}};
  const std::filesystem::path folder = std::filesystem::path(dir) / kAdapterFolder;
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  if (ec) return Status::IOError(folder.string() + ": " + ec.message());
  if (Status s = WriteSafetensors((folder / kAdapterWeightsFile).string(), AdapterTensors(model),
                                  {{"format", "pt"}});
      !s.ok()) {
    return s;
  }
  if (Status s = WriteFileAtomically((folder / kAdapterConfigFile).string(), config.dump(2) + "\n");
      !s.ok()) {
    return s;
  }
  const std::string in = std::string(kAdapterFolder) + "/";
  return std::vector<std::string>{in + kAdapterConfigFile, in + kAdapterWeightsFile};
}

}  // namespace trainerd
