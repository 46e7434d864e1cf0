// Weights a job starts from (init_from, job_spec.h): the tensors of a released
// model.safetensors copied into a freshly built model, by state_dict name.
#pragma once

#include <string>

#include "trainerd/common/status.h"
#include "trainerd/trainer/models/model.h"
#include "trainerd/trainer/spec/job_spec.h"

namespace trainerd {

// `path` itself, or the model.safetensors of the release folder `path` names.
std::string InitialWeightsFile(const std::string& path);

// Copies every tensor of `model`'s StateDict from the safetensors file `path`: each must be
// there under its name with its shape, floating-point ones stored in any floating-point
// type (converted to the model's), integer buffers as integers; a tensor of the file the
// model lacks is an error too (the file is another model's). InvalidArgument naming
// init_from, the file and the first tensor at fault; `model` may then be partly loaded.
Status LoadInitialWeights(const std::string& path, TrainableModel* model);

// trainer-run's init_from, before anything trains: `flag` (--init-from FILE, or "none" for
// none, or "" when not given) replaces the job's; current_release without a file is an
// error (only the daemon knows its releases). The file (a release folder's
// model.safetensors) is loaded into a model of the job (`num_classes` as BuildModel) to
// check it, then spec->init_from.path names it and .sha256 is its hash (the job identity
// includes it). InvalidArgument naming the job file and init_from otherwise.
Status ResolveInitialWeights(const std::string& flag, int num_classes, JobSpec* spec);

}  // namespace trainerd
