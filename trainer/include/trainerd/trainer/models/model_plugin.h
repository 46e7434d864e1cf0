// A model written in LibTorch C++, outside trainerd: a shared library built against the
// installed trainerd package (find_package(trainerd), then trainerd_add_model_plugin) that
// implements TrainableModel (model.h) and registers a factory by name:
//
//   class MyModel : public trainerd::TrainableModel { ... };   // blocks run through RunBlock
//   TRAINERD_REGISTER_MODEL("my_model", [](const trainerd::PluginModelContext& context) {
//     return std::make_shared<MyModel>(context.options.at("width").get<int>());
//   });
//
// A job trains it with `model: {kind: plugin, library: libmy_model.so, name: my_model,
// options: {width: 64}}`; trainer-run loads the library (plugin_library.h), creates the model
// from the job's options and trains it like a built-in one: plans, ledger, planner, parity,
// fallback and release apply, and a plan may checkpoint the blocks it runs through RunBlock.
// A library must be built against the same LibTorch and trainerd headers as the worker that
// loads it: the registration carries both versions and the worker refuses a mismatch.
// Walk-through: docs/bring-your-own-model.md; example: examples/plugin.
#pragma once

#include <torch/version.h>

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "trainerd/trainer/models/model.h"

namespace trainerd {

// The plugin interface's version: TrainableModel's layout and this header's types. Raised
// whenever either changes, so that a library built against other headers is refused.
inline constexpr int kModelPluginAbiVersion = 1;

// What a factory is given to build the model of one job.
struct PluginModelContext {
  nlohmann::json options;  // model.options, as the job wrote it (an object, maybe empty)
  ModelInputs inputs = ModelInputs::kTokens;  // model.inputs: what forward() is given
  int block_size = 0;  // model.block_size: the window of token and histogram inputs
};

// Builds the model, or throws (std::exception) with a message naming the option at fault:
// the worker reports it as a config error of model.options.
using PluginModelFactory =
    std::function<std::shared_ptr<TrainableModel>(const PluginModelContext& context)>;

// Adds `factory` as model `name`, registered by a library built with `abi_version` and
// LibTorch `torch_version`. Call through TRAINERD_REGISTER_MODEL, which fills both in.
// Returns true (for the static initialiser the macro declares).
bool RegisterPluginModel(const std::string& name, PluginModelFactory factory, int abi_version,
                         const std::string& torch_version);

}  // namespace trainerd

#define TRAINERD_PLUGIN_CONCAT_INNER(a, b) a##b
#define TRAINERD_PLUGIN_CONCAT(a, b) TRAINERD_PLUGIN_CONCAT_INNER(a, b)
// Registers `factory` as model `name` when the library is loaded.
#define TRAINERD_REGISTER_MODEL(name, factory)                                               \
  static const bool TRAINERD_PLUGIN_CONCAT(trainerd_registered_model_, __LINE__) =           \
      ::trainerd::RegisterPluginModel((name), (factory), ::trainerd::kModelPluginAbiVersion, \
                                      TORCH_VERSION)
