// The model of a job, resolved once in the worker before the plan is read or chosen: built
// from its kind's factory (the team's own model loaded from its file or plugin library), what
// only the built model tells filled in (ModelSpec::loaded), and checked against the job and
// its data. The same steps for every model kind.
#pragma once

#include <string>

#include "trainerd/common/status.h"
#include "trainerd/trainer/data/dataset.h"
#include "trainerd/trainer/spec/job_spec.h"

namespace trainerd {

// Builds the model of `spec->model` and fills spec->model.loaded: its blocks, whether it
// normalises over a microbatch, the SHA-256 of its file (the kind's FileKey) and, unless its
// kind declares its outputs (model_kind.h), from one forward of the data's first held-out
// sample the outputs' last dimension and, unless the job gives FLOPs or the model counts its
// own, counted FLOPs. Expands plan checkpoint_blocks: all and checks that the plan's block
// indices exist, that a BatchNorm model is not trained data-parallel (its running
// statistics are never synchronised across ranks), that model.loss: module has the model's
// own loss, and that the sample's
// outputs are what model.loss compares with its targets (logits [..., V] for targets [...]
// with cross_entropy, one shape with mse, a loss the model computes). InvalidArgument naming
// the job file, the key (model.path, model.library, model.options, model.loss,
// plan.checkpoint_blocks, ...) and the value otherwise; CheckModelFitsData then compares V or
// C with the data. Builds and runs the model on the CPU outside any memory limit (none of it
// is the training's memory); OutOfMemory when the machine itself could not hold it.
Status ResolveModel(JobSpec* spec, const Dataset& data);

// Whether the model of `spec` can read `data`: the data gives what it reads (a byte histogram
// needs text, rows need tensors), its vocabulary covers every token id (the kind's declared
// outputs, model.vocab_size, or the resolved model's logits), its classes every slice or every
// integer target (cross_entropy on rows). InvalidArgument naming the job file (`origin`), the
// key, the value and what the data needs.
Status CheckModelFitsData(const ModelSpec& spec, const std::string& origin, const Dataset& data);

// The classes the model of `spec` predicts at the data's ids (its vocabulary for next-token
// data, its classes for integer targets of cross_entropy): the kind's declared outputs or the
// resolved model's logits; 0 when neither tells, or the model predicts no ids (a byte-
// histogram classifier, mse).
std::int64_t ModelVocabulary(const ModelSpec& spec, const Dataset& data);

}  // namespace trainerd
