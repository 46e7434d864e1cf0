// The worker's side of model plugins (model_plugin.h): loading a library, finding the model
// a job names in it, and building that model. A library, once loaded, stays loaded for the
// life of the process (its code backs the models it built). Not thread-safe.
#pragma once

#include <memory>
#include <string>

#include "trainerd/common/status.h"
#include "trainerd/trainer/models/model.h"
#include "trainerd/trainer/spec/job_spec.h"

namespace trainerd {

// Loads spec.plugin.library (once per path) and checks that it registered the model
// spec.plugin.name (or exactly one model when no name is given) with this worker's plugin
// ABI and LibTorch version. InvalidArgument naming `origin` (the job file), the key
// (model.library, model.name) and the value otherwise: no such file, not a loadable library
// (the loader's message, e.g. an undefined symbol), no model registered, a model name it does
// not have (listing those it has), a library built against another LibTorch or ABI.
Status LoadPluginModel(const ModelSpec& spec, const std::string& origin);

// Builds the model of `spec` with its registered factory. REQUIRES: LoadPluginModel(spec)
// succeeded. Throws what the factory throws (a bad model.options).
std::shared_ptr<TrainableModel> BuildPluginModel(const ModelSpec& spec);

}  // namespace trainerd
