// The arrays of a memory-mapped .npy or .safetensors file (array_file.h) as tensors.
#pragma once

#include <torch/types.h>

#include "trainerd/common/array_file.h"
#include "trainerd/trainer/data/mapped_file.h"

namespace trainerd {

torch::ScalarType ScalarTypeOf(ElementType type);

// `array` of `file` as a tensor of its own type and shape that reads the mapping in place
// (no copy): valid while `file` is mapped, and never to be written.
torch::Tensor MappedTensor(const MappedFile& file, const ArrayView& array);

}  // namespace trainerd
