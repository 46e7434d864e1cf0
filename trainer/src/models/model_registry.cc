// Symbols of trainer-run (TrainableModel's, RegisterModel) are exported to the plugin
// libraries it loads (ENABLE_EXPORTS), so a plugin links against LibTorch only.
#include "trainerd/trainer/models/model_registry.h"

#include <torch/torch.h>

#include "models/registered_models.h"
#include "trainerd/trainer/models/build_model.h"

namespace trainerd {

ModelRegistry& TheModelRegistry() {
  static ModelRegistry registry;
  return registry;
}

bool RegisterModel(const std::string& name, ModelFactory factory, int abi_version,
                   const std::string& torch_version) {
  ModelRegistry& registry = TheModelRegistry();
  if (registry.models.count(name)) {
    registry.conflicts[registry.loading] = name;
    return false;
  }
  registry.models[name] = {std::move(factory), registry.loading, abi_version, torch_version};
  return true;
}

std::shared_ptr<TrainableModel> BuildModel(const ModelSpec& spec, int classes,
                                           const std::string& origin) {
  const auto registered = TheModelRegistry().models.find(spec.kind);
  TORCH_CHECK(registered != TheModelRegistry().models.end() && registered->second.library.empty(),
              "no model registered for model kind ", spec.kind);
  ModelContext context;
  context.options = spec.options;
  context.inputs = spec.inputs;
  context.block_size = spec.block_size;
  context.classes = classes;
  context.origin = origin;
  std::shared_ptr<TrainableModel> model = registered->second.factory(context);
  TORCH_CHECK(model != nullptr, "the factory of model kind ", spec.kind, " returned no model");
  model->set_loss(spec.loss);
  return model;
}

}  // namespace trainerd
