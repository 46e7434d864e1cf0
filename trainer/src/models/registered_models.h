// The registry behind model_registry.h, shared by BuildModel and the plugin loader
// (models/plugin/): every registered model with the library that registered it ("" for the
// models linked into trainer-run). Not thread-safe.
#pragma once

#include <map>
#include <set>
#include <string>

#include "trainerd/trainer/models/model_registry.h"

namespace trainerd {

struct RegisteredModel {
  ModelFactory factory;
  std::string library;  // the plugin library whose loading registered it; "" for a built-in
  int abi_version = 0;
  std::string torch_version;
};

struct ModelRegistry {
  std::map<std::string, RegisteredModel> models;
  std::set<std::string> loaded;                  // libraries dlopen accepted, by the job's path
  std::string loading;                           // the library being loaded: who is registering
  std::map<std::string, std::string> conflicts;  // library -> the name it registered twice
};

ModelRegistry& TheModelRegistry();

}  // namespace trainerd
