#include "loop/adapter_files.h"

#include <torch/torch.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "loop/safetensors_writer.h"
#include "trainerd/common/atomic_file.h"
#include "trainerd/trainer/models/adaptable_linear.h"
#include "trainerd/trainer/models/adapters.h"

namespace trainerd {

namespace {

// The folder whose weights the adapter was trained on, for peft to put it on: the release
// the night started from where it did (init_from, an earlier night's merged model, a folder
// transformers loads), else the model's own folder; null where neither is a Hugging Face
// folder (a bare weights file, another kind of model).
nlohmann::json AdapterBase(const JobSpec& spec) {
  namespace fs = std::filesystem;
  if (spec.model.kind != "hf") return nullptr;
  if (spec.init_from.path.empty()) return spec.model.options.value("path", std::string());
  const fs::path release = fs::path(spec.init_from.path).parent_path();
  std::error_code ec;
  if (!fs::is_regular_file(release / "config.json", ec)) return nullptr;
  return release.string();
}

}  // namespace

Result<std::vector<std::string>> WriteAdapterFiles(const JobSpec& spec, torch::nn::Module& model,
                                                   const std::string& dir) {
  const FinetuneSpec& f = spec.finetune;
  if (f.method != FinetuneMethod::kLora) return std::vector<std::string>{};
  bool fan_in_fan_out = false;
  for (const auto& item : model.named_modules()) {
    const auto* layer = dynamic_cast<AdaptableLayer*>(item.value().get());
    if (layer != nullptr && layer->has_adapter()) fan_in_fan_out |= layer->fan_in_fan_out();
  }
  const nlohmann::json config = {
      {"peft_type", "LORA"},
      {"task_type", spec.model.inputs == ModelInputs::kTokens ? nlohmann::json("CAUSAL_LM")
                                                              : nlohmann::json(nullptr)},
      {"base_model_name_or_path", AdapterBase(spec)},
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
