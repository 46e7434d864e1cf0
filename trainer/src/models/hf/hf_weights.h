// The weights of a Hugging Face model folder by their Hugging Face names, memory-mapped:
// model.safetensors, or the shards model.safetensors.index.json's weight_map names.
#pragma once

#include <torch/nn/module.h>

#include <map>
#include <string>
#include <vector>

#include "trainerd/common/array_file.h"
#include "trainerd/common/status.h"
#include "trainerd/trainer/data/mapped_file.h"

namespace trainerd {

class HfWeights {
 public:
  // Errors name the file: neither weights file, an index that does not parse, a shard the
  // index names that is absent, a tensor the index places in a shard that lacks it.
  static Result<HfWeights> Open(const std::string& folder);

  // Copies every parameter and buffer of `module` from the tensor of its name, or of its
  // name less `optional_prefix` (converted to the module's dtype). Errors name the file and
  // the tensor: one the module needs that is absent or of another shape, and tensors the
  // module has no place for (`ignored`: names that may be present and are not weights, e.g.
  // a tied lm_head's copy).
  Status LoadInto(torch::nn::Module& module, const std::vector<std::string>& ignored,
                  const std::string& optional_prefix = "") const;

 private:
  struct Entry {
    std::size_t file = 0;  // in files_
    ArrayView array;
  };
  std::string folder_;
  std::vector<MappedFile> files_;
  std::map<std::string, Entry> tensors_;
};

}  // namespace trainerd
