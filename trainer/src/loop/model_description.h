// What a trained model is, written beside it as model.json so that the team's code (and an
// operator) can load model.safetensors without trainerd: the model kind and configuration,
// its loss and inputs, every tensor's name, shape and dtype, the files, and what it was
// trained from (job identity, data fingerprint, LibTorch version). The daemon adds the run
// and config identity when it publishes the release.
#pragma once

#include <nlohmann/json.hpp>

#include "trainerd/trainer/models/model.h"
#include "trainerd/trainer/spec/job_spec.h"

namespace trainerd {

// `files` names the artifacts beside the description, e.g. {"weights": "model.safetensors",
// "module": "model.pt"}.
nlohmann::json DescribeModel(const JobSpec& spec, const TrainableModel& model,
                             const std::string& job_identity, const std::string& data_fingerprint,
                             const nlohmann::json& files);

// The model's configuration as the job gave it: its kind and the kind's options, the keys
// every kind shares, with what loading it told (its blocks, its file's SHA-256).
nlohmann::json ModelConfigJson(const ModelSpec& spec);

}  // namespace trainerd
