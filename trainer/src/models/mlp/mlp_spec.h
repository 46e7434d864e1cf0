// The keys of the built-in MLP classifier (model.kind: mlp), which learns which evaluation
// slice (text file) a window's byte histogram comes from. Torch-free: the job spec reads them.
#pragma once

#include <nlohmann/json.hpp>

#include "trainerd/trainer/spec/job_spec.h"

namespace trainerd {

struct MlpOptions {
  int hidden = 256;         // width of each hidden layer
  int layers = 2;           // hidden layers ("blocks")
  bool batch_norm = false;  // BatchNorm1d after each hidden Linear
  double dropout = 0.0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(MlpOptions, hidden, layers, batch_norm, dropout)

// The model: section of an MLP of `options` over windows of `block_size` bytes, as the parser
// would read it: jobs built in code (tests, benchmarks) start from it.
ModelSpec MlpModelSpec(const MlpOptions& options, int block_size = 128);

}  // namespace trainerd
