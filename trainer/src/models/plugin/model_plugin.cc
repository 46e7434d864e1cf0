// The registry plugin libraries add their models to (model_plugin.h) and the worker's loader
// (plugin_library.h). Symbols of trainer-run (TrainableModel's, RegisterPluginModel) are
// exported to the libraries it loads (ENABLE_EXPORTS), so a plugin links against LibTorch
// only.
#include "trainerd/trainer/models/model_plugin.h"

#include <dlfcn.h>
#include <torch/torch.h>

#include <filesystem>
#include <map>
#include <set>

#include "models/plugin/plugin_library.h"

namespace trainerd {
namespace {

struct RegisteredModel {
  PluginModelFactory factory;
  std::string library;  // the file whose loading registered it
  int abi_version = 0;
  std::string torch_version;
};

struct Registry {
  std::map<std::string, RegisteredModel> models;
  std::set<std::string> loaded;                  // libraries dlopen accepted, by the job's path
  std::string loading;                           // the library being loaded: who is registering
  std::map<std::string, std::string> conflicts;  // library -> the name it registered twice
};

Registry& TheRegistry() {
  static Registry registry;
  return registry;
}

std::string Quoted(const std::string& text) { return "'" + text + "'"; }

std::string NamesIn(const Registry& registry, const std::string& library) {
  std::string names;
  for (const auto& [name, model] : registry.models) {
    if (model.library == library) names += (names.empty() ? "" : ", ") + Quoted(name);
  }
  return names;
}

// Loads `library` unless loaded; "" or the loader's reason.
std::string Load(Registry& registry, const std::string& library) {
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

// The registered model `spec` names, or why there is none.
const RegisteredModel* Find(const Registry& registry, const PluginOptions& spec, std::string* why) {
  if (spec.name.empty()) {
    const RegisteredModel* only = nullptr;
    int count = 0;
    for (const auto& [name, model] : registry.models) {
      if (model.library == spec.library) only = &model, ++count;
    }
    if (count == 1) return only;
    *why = count == 0 ? "model.library: " + spec.library +
                            ": registers no model (TRAINERD_REGISTER_MODEL in model_plugin.h)"
                      : "model.name: the library registers " + NamesIn(registry, spec.library) +
                            ": name the one to train";
    return nullptr;
  }
  const auto it = registry.models.find(spec.name);
  if (it == registry.models.end() || it->second.library != spec.library) {
    const std::string names = NamesIn(registry, spec.library);
    *why = "model.name: " + spec.name + ": " + spec.library + " registers " +
           (names.empty() ? std::string("no model") : names);
    return nullptr;
  }
  return &it->second;
}

}  // namespace

bool RegisterPluginModel(const std::string& name, PluginModelFactory factory, int abi_version,
                         const std::string& torch_version) {
  Registry& registry = TheRegistry();
  if (registry.models.count(name)) {
    registry.conflicts[registry.loading] = name;
    return false;
  }
  registry.models[name] = {std::move(factory), registry.loading, abi_version, torch_version};
  return true;
}

Status LoadPluginModel(const ModelSpec& spec, const std::string& origin) {
  const PluginOptions& plugin = spec.plugin;
  const std::string where = origin + ": model.library: " + plugin.library;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(plugin.library, ec)) {
    return Status::InvalidArgument(where +
                                   ": no such file (build the plugin with find_package(trainerd) "
                                   "and trainerd_add_model_plugin)");
  }
  Registry& registry = TheRegistry();
  if (const std::string reason = Load(registry, plugin.library); !reason.empty()) {
    return Status::InvalidArgument(where + ": not a loadable plugin library: " + reason);
  }
  if (const auto conflict = registry.conflicts.find(plugin.library);
      conflict != registry.conflicts.end()) {
    return Status::InvalidArgument(where + ": registers model " + Quoted(conflict->second) +
                                   ", which another library registered first");
  }
  std::string why;
  const RegisteredModel* model = Find(registry, plugin, &why);
  if (model == nullptr) return Status::InvalidArgument(origin + ": " + why);
  if (model->abi_version != kModelPluginAbiVersion || model->torch_version != TORCH_VERSION) {
    return Status::InvalidArgument(where + ": built against LibTorch " + model->torch_version +
                                   " and plugin ABI " + std::to_string(model->abi_version) +
                                   ", but this worker runs LibTorch " + TORCH_VERSION +
                                   " and plugin ABI " + std::to_string(kModelPluginAbiVersion) +
                                   ": rebuild it against this trainerd");
  }
  return Status::Ok();
}

std::shared_ptr<TrainableModel> BuildPluginModel(const ModelSpec& spec) {
  std::string why;
  const RegisteredModel* model = Find(TheRegistry(), spec.plugin, &why);
  TORCH_CHECK(model != nullptr, why);
  PluginModelContext context;
  context.options = spec.plugin.options;
  context.inputs = spec.own.inputs;
  context.block_size = spec.gpt.block_size;
  std::shared_ptr<TrainableModel> built = model->factory(context);
  TORCH_CHECK(built != nullptr, "the factory of plugin model ", spec.plugin.name,
              " returned no model");
  return built;
}

}  // namespace trainerd
