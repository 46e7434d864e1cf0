// The keys of a Hugging Face causal-LM folder (model.kind: hf): the folder, and its config.json
// as read when the job was. Torch-free: the job spec reads them.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "models/hf/hf_config_spec.h"
#include "trainerd/trainer/spec/job_spec.h"

namespace trainerd {

struct HfKeys {
  std::string path;  // the folder, absolute
  HfDecoderConfig config;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(HfKeys, path, config)

}  // namespace trainerd
