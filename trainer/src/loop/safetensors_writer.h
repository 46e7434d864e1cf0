// Writes named tensors as a `.safetensors` file (the format of Hugging Face's safetensors:
// an 8-byte little-endian header length, a JSON header naming each tensor's dtype, shape and
// byte range, then the tensors' bytes, row-major little-endian), which Python loads with
// `safetensors.torch.load_file` and a model with `load_state_dict`. The header is padded to a
// multiple of 8 bytes as the reference implementation does. Tensors are copied to the CPU,
// made contiguous and written in name order; `metadata` becomes the header's
// "__metadata__" (string values only, as the format requires).
#pragma once

#include <torch/types.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "trainerd/common/status.h"

namespace trainerd {

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

// Atomically replaces `path`. InvalidArgument for a dtype the format has no name for or a
// name given twice; IOError naming the file when writing fails.
Status WriteSafetensors(const std::string& path, const NamedTensors& tensors,
                        const std::map<std::string, std::string>& metadata);

// The format's name for `type` ("F32", "BF16", "I64", ...); empty when it has none.
std::string SafetensorsDtype(torch::ScalarType type);

}  // namespace trainerd
