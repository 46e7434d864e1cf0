// The keys of a model written in LibTorch C++ as a plugin library (model.kind: plugin): the
// library, the model it registered, and the options handed to that model's factory
// (model_registry.h). Torch-free: the job spec reads them.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace trainerd {

struct PluginKeys {
  std::string library;  // the .so file, absolute after parsing
  std::string name;     // the registered model; "" = the library's only one
  nlohmann::json options = nlohmann::json::object();  // model.options, for its factory
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(PluginKeys, library, name, options)

}  // namespace trainerd
