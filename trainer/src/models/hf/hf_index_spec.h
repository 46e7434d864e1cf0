// A sharded Hugging Face folder's model.safetensors.index.json, read as something the team
// dropped in: bounded in size (16 MiB), a regular file (a FIFO would block the worker until
// its deadline), nested at most kMaxJsonDepth levels, and every shard it names a file of the
// folder itself (no "../x", no absolute path); and which files of a folder hold its weights.
// No torch (a *_spec file): the job spec hashes those files and a fuzz harness drives it.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "trainerd/common/status.h"

namespace trainerd {

inline constexpr const char* kHfWeightsFile = "model.safetensors";
inline constexpr const char* kHfIndexFile = "model.safetensors.index.json";

// The shards of the index at `path` and the tensors its weight_map places in each, by shard
// file name. InvalidArgument naming the file and the key for anything else.
Result<std::map<std::string, std::vector<std::string>>> ReadHfIndex(const std::string& path);

// The files of `folder` that hold its weights, by name, with the tensors the index places in
// each: model.safetensors (placing none: it holds what it holds) when present, else the shards
// of model.safetensors.index.json (ReadHfIndex). InvalidArgument naming the folder when it has
// neither.
Result<std::map<std::string, std::vector<std::string>>> HfWeightFiles(const std::string& folder);

}  // namespace trainerd
