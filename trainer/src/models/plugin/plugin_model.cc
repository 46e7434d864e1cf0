// model.kind: plugin: loading the library a job names, finding the model it registered
// (model_registry.h) and building it. A library, once loaded, stays loaded for the life of the
// process (its code backs the models it built). Not thread-safe.
#include <dlfcn.h>
#include <torch/torch.h>

#include <filesystem>

#include "models/plugin/plugin_spec.h"
#include "models/registered_models.h"
#include "trainerd/trainer/models/build_model.h"
#include "trainerd/trainer/models/model_registry.h"

namespace trainerd {
namespace {

std::string Quoted(const std::string& text) { return "'" + text + "'"; }

std::string NamesIn(const ModelRegistry& registry, const std::string& library) {
  std::string names;
  for (const auto& [name, model] : registry.models) {
    if (model.library == library) names += (names.empty() ? "" : ", ") + Quoted(name);
  }
  return names;
}

// Loads `library` unless loaded; "" or the loader's reason.
std::string Load(ModelRegistry& registry, const std::string& library) {
  if (registry.loaded.count(library)) return "";
  registry.loading = library;
  // RTLD_LOCAL: two plugins may define the same class names; RTLD_NOW: an undefined symbol
  // (a library built against other headers) fails here, not in the middle of a run.
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  registry.loading.clear();
  if (handle == nullptr) return dlerror();
  registry.loaded.insert(library);  // never closed: its code backs the models it builds
  return "";
}

// The registered model `keys` name, or why there is none.
const RegisteredModel* Find(const ModelRegistry& registry, const PluginKeys& keys,
                            std::string* why) {
  if (keys.name.empty()) {
    const RegisteredModel* only = nullptr;
    int count = 0;
    for (const auto& [name, model] : registry.models) {
      if (model.library == keys.library) only = &model, ++count;
    }
    if (count == 1) return only;
    *why = count == 0 ? "model.library: " + keys.library +
                            ": registers no model (TRAINERD_REGISTER_MODEL in model_registry.h)"
                      : "model.name: the library registers " + NamesIn(registry, keys.library) +
                            ": name the one to train";
    return nullptr;
  }
  const auto it = registry.models.find(keys.name);
  if (it == registry.models.end() || it->second.library != keys.library) {
    const std::string names = NamesIn(registry, keys.library);
    *why = "model.name: " + keys.name + ": " + keys.library + " registers " +
           (names.empty() ? std::string("no model") : names);
    return nullptr;
  }
  return &it->second;
}

// The library of `keys` loaded, and the model it registered under keys.name (or its only one)
// with this worker's plugin ABI and LibTorch version. ModelLoadError naming `origin` (the job
// file), the key (model.library, model.name) and the value otherwise: no such file, not a
// loadable library (the loader's message, e.g. an undefined symbol), no model registered, a
// model name it does not have (listing those it has), a library built against another
// LibTorch or ABI.
const RegisteredModel& LoadPluginModel(const PluginKeys& keys, const std::string& origin) {
  const std::string where = origin + ": model.library: " + keys.library;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(keys.library, ec)) {
    throw ModelLoadError(where +
                         ": no such file (build the plugin with find_package(trainerd) and "
                         "trainerd_add_model_plugin)");
  }
  ModelRegistry& registry = TheModelRegistry();
  if (const std::string reason = Load(registry, keys.library); !reason.empty()) {
    throw ModelLoadError(where + ": not a loadable plugin library: " + reason);
  }
  if (const auto conflict = registry.conflicts.find(keys.library);
      conflict != registry.conflicts.end()) {
    const bool built_in = registry.models.at(conflict->second).library.empty();
    throw ModelLoadError(where + ": registers model " + Quoted(conflict->second) +
                         (built_in ? ", the name of a model kind of trainerd"
                                   : ", which another library registered first"));
  }
  std::string why;
  const RegisteredModel* model = Find(registry, keys, &why);
  if (model == nullptr) throw ModelLoadError(origin + ": " + why);
  if (model->abi_version != kModelPluginAbiVersion || model->torch_version != TORCH_VERSION) {
    throw ModelLoadError(where + ": built against LibTorch " + model->torch_version +
                         " and plugin ABI " + std::to_string(model->abi_version) +
                         ", but this worker runs LibTorch " + TORCH_VERSION + " and plugin ABI " +
                         std::to_string(kModelPluginAbiVersion) +
                         ": rebuild it against this trainerd");
  }
  return *model;
}

// The plugin's model built from model.options by its registered factory.
std::shared_ptr<TrainableModel> BuildPluginModel(const ModelContext& context) {
  const PluginKeys keys = context.options.get<PluginKeys>();
  const RegisteredModel& registered = LoadPluginModel(keys, context.origin);
  ModelContext plugin_context = context;
  plugin_context.options = keys.options;
  std::shared_ptr<TrainableModel> model;
  try {
    model = registered.factory(plugin_context);
  } catch (const std::exception& e) {
    throw ModelLoadError(context.origin + ": model.options: " + keys.options.dump() +
                         ": the plugin cannot build its model: " + ModelErrorReason(e));
  }
  if (model == nullptr) {
    throw ModelLoadError(context.origin + ": model.name: " + keys.name +
                         ": the plugin's factory returned no model");
  }
  if (model->sample_format() != SampleFormatOf(context.inputs)) {
    throw ModelLoadError(context.origin + ": model.inputs: " + ToString(context.inputs) +
                         ", but the plugin model reads another sample format");
  }
  return model;
}

TRAINERD_REGISTER_MODEL("plugin", BuildPluginModel);

}  // namespace
}  // namespace trainerd
