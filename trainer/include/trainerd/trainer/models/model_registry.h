// The models trainer-run builds, by name. Every model kind's model registers here under the
// kind's name (its keys register in spec/model_kind.h under the same name), and so does every
// model a plugin library defines, in the same way:
//
//   class MyModel : public trainerd::TrainableModel { ... };   // blocks run through RunBlock
//   TRAINERD_REGISTER_MODEL("my_model", [](const trainerd::ModelContext& context) {
//     return std::make_shared<MyModel>(context.options.at("width").get<int>());
//   });
//
// A plugin is a shared library built against the installed trainerd package
// (find_package(trainerd), then trainerd_add_model_plugin); a job trains its model with
// `model: {kind: plugin, library: libmy_model.so, name: my_model, options: {width: 64}}`, and
// plans, ledger, planner, parity, fallback and release apply as to a built-in model. A library
// must be built against the same LibTorch and trainerd headers as the worker that loads it:
// the registration carries both versions and the worker refuses a mismatch.
// Walk-through: docs/bring-your-own-model.md; example: examples/plugin; the extension points:
// docs/extending.md. Registration happens while a library loads (built-in models: at start-up,
// their library linked whole); not thread-safe.
#pragma once

#include <torch/version.h>

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "trainerd/trainer/models/model.h"

namespace trainerd {

// The plugin interface's version: TrainableModel's layout and this header's types. Raised
// whenever either changes, so that a library built against other headers is refused.
inline constexpr int kModelPluginAbiVersion = 6;

// What a factory is given to build the model of one job.
struct ModelContext {
  // The model's keys: a kind's options (spec/model_kind.h), or for a plugin's model
  // model.options as the job wrote it (an object, maybe empty).
  nlohmann::json options = nlohmann::json::object();
  ModelInputs inputs = ModelInputs::kTokens;  // what forward() is given (model.inputs)
  int block_size = 0;  // model.block_size: the window of token and histogram inputs
  int classes = 0;     // the data's evaluation slices: a classifier of windows has one per slice
  std::string origin;  // the job file, for messages
};

// Thrown by a factory with a message complete in the job's terms (the job file, the key, the
// value): the worker reports it as it is. Any other exception is reported as a bad key.
class ModelLoadError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Builds the model, or throws (std::exception) with a message naming the option at fault:
// the worker reports it as a config error of the model's keys.
using ModelFactory = std::function<std::shared_ptr<TrainableModel>(const ModelContext& context)>;

// Adds `factory` as model `name`, registered by code built with `abi_version` and LibTorch
// `torch_version`. Call through TRAINERD_REGISTER_MODEL, which fills both in. Returns true
// (for the static initialiser the macro declares); a name registered before is kept and the
// registering library refused when it is loaded.
bool RegisterModel(const std::string& name, ModelFactory factory, int abi_version,
                   const std::string& torch_version);

}  // namespace trainerd

#define TRAINERD_MODEL_CONCAT_INNER(a, b) a##b
#define TRAINERD_MODEL_CONCAT(a, b) TRAINERD_MODEL_CONCAT_INNER(a, b)
// Registers `factory` as model `name` when the library holding it is loaded.
#define TRAINERD_REGISTER_MODEL(name, factory)                                         \
  static const bool TRAINERD_MODEL_CONCAT(trainerd_registered_model_, __LINE__) =      \
      ::trainerd::RegisterModel((name), (factory), ::trainerd::kModelPluginAbiVersion, \
                                TORCH_VERSION)
