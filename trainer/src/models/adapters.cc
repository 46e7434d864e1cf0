#include "trainerd/trainer/models/adapters.h"

#include <torch/torch.h>

#include <algorithm>
#include <cctype>

#include "trainerd/trainer/models/adaptable_linear.h"

namespace trainerd {
namespace {

// Adapters' dropout sites, after every site a model's own dropout uses.
constexpr int kFirstAdapterSite = 1 << 20;

bool IsIndex(const std::string& part) {
  return !part.empty() && std::all_of(part.begin(), part.end(),
                                      [](unsigned char c) { return std::isdigit(c) != 0; });
}

std::string ShortName(const std::string& path) {
  const std::size_t last = path.rfind('.');
  if (last == std::string::npos) return path;
  if (!IsIndex(path.substr(last + 1))) return path.substr(last + 1);
  const std::size_t before = path.rfind('.', last - 1);
  return before == std::string::npos ? path : path.substr(before + 1);
}

std::string Joined(const std::vector<std::string>& names) {
  std::string text;
  for (const std::string& name : names) text += (text.empty() ? "" : ", ") + name;
  return text;
}

}  // namespace

std::vector<std::string> AdaptableLayerNames(torch::nn::Module& model) {
  std::vector<std::string> names;
  for (const auto& item : model.named_modules()) {
    if (dynamic_cast<AdaptableLayer*>(item.value().get()) == nullptr) continue;
    const std::string name = ShortName(item.key());
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  return names;
}

Status AttachAdapters(const JobSpec& spec, torch::nn::Module* model) {
  const FinetuneSpec& finetune = spec.finetune;
  if (finetune.method == FinetuneMethod::kFull) return Status::Ok();
  const auto modules = model->named_modules();
  std::vector<bool> adapted(modules.size(), false);
  for (const std::string& target : finetune.targets) {
    bool named = false;
    for (std::size_t i = 0; i < modules.size(); ++i) {
      const std::string& path = modules[i].key();
      if (!TargetNamesModule(target, path)) continue;
      if (dynamic_cast<AdaptableLayer*>(modules[i].value().get()) == nullptr) {
        return Status::InvalidArgument(
            spec.source_path + ": finetune.targets: '" + target + "' names " + path +
            ", which takes no adapter (only linear layers do, not an LM head or an embedding); " +
            "the layers that take one: " + Joined(AdaptableLayerNames(*model)));
      }
      named = adapted[i] = true;
    }
    if (!named) {
      const std::vector<std::string> layers = AdaptableLayerNames(*model);
      return Status::InvalidArgument(
          spec.source_path + ": finetune.targets: '" + target + "' names no layer of this model; " +
          (layers.empty() ? std::string("it has no layer that takes an adapter")
                          : "the layers that take one: " + Joined(layers)));
    }
  }
  for (torch::Tensor& p : model->parameters()) p.requires_grad_(false);
  if (finetune.base_dtype == Precision::kBf16) {
    for (const auto& item : modules) {
      if (auto* layer = dynamic_cast<AdaptableLayer*>(item.value().get())) {
        layer->StoreWeightAs(torch::kBFloat16);
      }
    }
  }
  int site = kFirstAdapterSite;
  for (std::size_t i = 0; i < modules.size(); ++i) {
    if (adapted[i]) {
      dynamic_cast<AdaptableLayer&>(*modules[i].value()).AttachAdapter(finetune, site++);
    }
  }
  return Status::Ok();
}

std::vector<std::pair<std::string, torch::Tensor>> AdapterTensors(torch::nn::Module& model) {
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  for (const auto& item : model.named_modules()) {
    const auto* layer = dynamic_cast<AdaptableLayer*>(item.value().get());
    if (layer == nullptr || !layer->has_adapter()) continue;
    for (const char* part : {"lora_A", "lora_B"}) {
      const std::string name = item.key() + "." + part + ".weight";
      tensors.emplace_back("base_model.model." + name,
                           *item.value()->named_parameters().find(std::string(part) + ".weight"));
    }
  }
  return tensors;
}

void MergeAdapters(torch::nn::Module* model) {
  torch::NoGradGuard no_grad;
  for (const auto& item : model->named_modules()) {
    if (auto* layer = dynamic_cast<AdaptableLayer*>(item.value().get())) layer->MergeAdapter();
  }
  for (torch::Tensor& p : model->parameters()) {
    if (p.scalar_type() != torch::kFloat) p.set_data(p.to(torch::kFloat));  // a bf16 base
    p.requires_grad_(true);
  }
}

}  // namespace trainerd
