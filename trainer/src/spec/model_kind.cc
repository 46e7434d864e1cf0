#include "trainerd/trainer/spec/model_kind.h"

#include <map>
#include <stdexcept>

#include "trainerd/common/sha256.h"

namespace trainerd {
namespace {

std::map<std::string, std::unique_ptr<ModelKind>>& Kinds() {
  static std::map<std::string, std::unique_ptr<ModelKind>> kinds;
  return kinds;
}

}  // namespace

Result<std::string> ModelKind::ContentSha256(const std::string& path) const {
  return Sha256Path(path);
}

bool RegisterModelKind(const std::string& name, std::unique_ptr<ModelKind> kind) {
  return Kinds().emplace(name, std::move(kind)).second;
}

const ModelKind* FindModelKind(const std::string& name) {
  const auto it = Kinds().find(name);
  return it == Kinds().end() ? nullptr : it->second.get();
}

std::vector<std::string> ModelKindNames() {
  std::vector<std::string> names;
  for (const auto& [name, kind] : Kinds()) names.push_back(name);
  return names;
}

const ModelKind& ModelKindOf(const ModelSpec& spec) {
  const ModelKind* kind = FindModelKind(spec.kind);
  if (kind == nullptr) throw std::invalid_argument("no model kind named '" + spec.kind + "'");
  return *kind;
}

void ReadOwnModelKeys(YamlReader& model, const ModelKeysContext& context, ModelSpec* spec) {
  std::string inputs = kModelInputsNames.Name(context.data_inputs);
  model.String("inputs", &inputs, kModelInputsNames.Names());
  spec->inputs = kModelInputsNames.Parse(inputs).value_or(context.data_inputs);
  std::string loss = kLossKindNames.Name(spec->loss.kind);
  model.String("loss", &loss, kLossKindNames.Names());
  spec->loss.kind = kLossKindNames.Parse(loss).value_or(LossKind::kCrossEntropy);
  if (model.Has("ignore_index")) {
    int ignore_index = 0;
    model.Int("ignore_index", &ignore_index, -(1 << 30), 1 << 30);
    spec->loss.ignore_index = ignore_index;
  }
  if (model.Has("flops_per_sample")) {
    double flops = 0;
    model.Double("flops_per_sample", &flops, 0.0, 1e30, /*min_open=*/true);
    spec->flops_per_sample = flops;
  }
}

}  // namespace trainerd
