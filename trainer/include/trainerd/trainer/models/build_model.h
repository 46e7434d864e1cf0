// Building the model of a job from its kind's registered factory (model_registry.h): the one
// place that turns a ModelSpec into a TrainableModel, for the trainer and ResolveModel alike.
#pragma once

#include <exception>
#include <memory>
#include <string>

#include "trainerd/trainer/models/model.h"
#include "trainerd/trainer/spec/job_spec.h"

namespace trainerd {

// The model of `spec` with the job's loss; `classes` is the data's evaluation slices,
// `origin` the job file. Throws ModelLoadError with a message in the job's terms (a missing
// model file, a plugin library that cannot be loaded), or what the factory throws (a bad key).
std::shared_ptr<TrainableModel> BuildModel(const ModelSpec& spec, int classes,
                                           const std::string& origin);

// The message of an exception a model raised, without LibTorch's backtrace and TorchScript's
// source listing ("RuntimeError: mat1 and mat2 must have the same dtype").
std::string ModelErrorReason(const std::exception& e);

}  // namespace trainerd
