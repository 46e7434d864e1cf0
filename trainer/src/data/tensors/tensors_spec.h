// The keys of tensor data (data.format: tensors): inputs and targets as arrays whose rows are
// samples, in .npy files or .safetensors files. Torch-free: the job spec reads them.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "trainerd/trainer/spec/job_spec.h"

namespace trainerd {

struct TensorDataKeys {
  // The training split and the evaluation splits (one slice each, named by stem): .safetensors
  // files or directories of .npy files, absolute after parsing.
  std::string train;
  std::vector<std::string> eval;
  // The arrays' names: tensor names in .safetensors, file stems of .npy.
  std::string inputs = "inputs";
  std::string targets = "targets";
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(TensorDataKeys, train, eval, inputs, targets)

// The data: section of tensor data of `keys`: jobs built in code start from it.
DataSpec TensorDataSpec(const TensorDataKeys& keys);

}  // namespace trainerd
