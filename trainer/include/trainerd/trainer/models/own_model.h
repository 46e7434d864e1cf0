// The team's own model (model.kind: torchscript or plugin), resolved once in the worker before
// the plan is read or chosen: what only its file tells is filled in and checked against the
// job and its data.
#pragma once

#include <exception>
#include <string>

#include "trainerd/common/status.h"
#include "trainerd/trainer/data/dataset.h"
#include "trainerd/trainer/spec/job_spec.h"

namespace trainerd {

// Loads the model of `spec->model` (a TorchScript file, or a plugin library's registered
// model built from model.options) and fills spec->model.own: num_blocks,
// has_batch_statistics, the file's sha256, and from one forward of the data's first
// held-out sample the outputs' last dimension and, unless the job gives them, counted FLOPs.
// Expands plan checkpoint_blocks: all and checks that the plan's block indices exist, that
// model.loss: module has the model's own loss, that a plugin reads what model.inputs says,
// and that the sample's outputs are what model.loss compares with its targets (logits
// [..., V] for targets [...] with cross_entropy, one shape with mse, a loss the model
// computes). InvalidArgument naming the job file, the key (model.path, model.library,
// model.options, model.loss, plan.checkpoint_blocks, ...) and the value otherwise;
// CheckModelFitsData (model.h) then compares V or C with the data. A no-op for the built-in
// models.
Status ResolveOwnModel(JobSpec* spec, const Dataset& data);

// The message of an exception the team's model raised, without LibTorch's backtrace and
// TorchScript's source listing ("RuntimeError: mat1 and mat2 must have the same dtype").
std::string ModelErrorReason(const std::exception& e);

}  // namespace trainerd
