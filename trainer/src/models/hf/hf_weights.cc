#include "models/hf/hf_weights.h"

#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "models/hf/hf_index_spec.h"
#include "trainerd/trainer/data/array_tensor.h"

namespace trainerd {
namespace {

std::string Quoted(const std::string& name) { return "'" + name + "'"; }

}  // namespace

Result<HfWeights> HfWeights::Open(const std::string& folder) {
  namespace fs = std::filesystem;
  HfWeights weights;
  weights.folder_ = folder;
  // file -> tensors the index puts there
  Result<std::map<std::string, std::vector<std::string>>> shards = HfWeightFiles(folder);
  if (!shards.ok()) return shards.status();
  std::error_code ec;
  const std::string index = (fs::path(folder) / kHfIndexFile).string();
  for (const auto& [shard, expected] : *shards) {
    const std::string path = (fs::path(folder) / shard).string();
    if (!fs::exists(path, ec)) {
      return Status::InvalidArgument(index + ": weight_map names shard " + shard + " (for " +
                                     Quoted(expected.front()) + "), and " + path + " is missing");
    }
    Result<MappedFile> file = MappedFile::Open(path, /*access_random=*/false);
    if (!file.ok()) return file.status();
    Result<std::map<std::string, ArrayView>> arrays =
        ReadSafetensorsHeader(file->data(), file->size(), path);
    if (!arrays.ok()) return arrays.status();
    for (const std::string& name : expected) {
      if (!arrays->contains(name)) {
        return Status::InvalidArgument(index + ": weight_map places " + Quoted(name) + " in " +
                                       shard + ", and " + path + " has no such tensor");
      }
    }
    for (auto& [name, array] : *arrays) {
      const auto [placed, added] =
          weights.tensors_.emplace(name, Entry{weights.files_.size(), array});
      if (!added) {
        return Status::InvalidArgument(folder + ": tensor " + Quoted(name) + " is in both " +
                                       weights.files_[placed->second.file].path() + " and " + path +
                                       ": which one is the model's is not known");
      }
    }
    weights.files_.push_back(std::move(*file));
  }
  return weights;
}

Status HfWeights::LoadInto(torch::nn::Module& module, const std::vector<std::string>& ignored,
                           const std::string& optional_prefix) const {
  torch::NoGradGuard no_grad;
  std::set<std::string> unused;
  for (const auto& [name, entry] : tensors_) unused.insert(name);
  for (const std::string& name : ignored) unused.erase(name);
  auto load = [&](const std::string& name, torch::Tensor& target) -> Status {
    auto found = tensors_.find(name);
    if (found == tensors_.end() && !optional_prefix.empty() && name.starts_with(optional_prefix)) {
      found = tensors_.find(name.substr(optional_prefix.size()));
    }
    if (found == tensors_.end()) {
      return Status::InvalidArgument(folder_ + ": no tensor " + Quoted(name) + " in its weights (" +
                                     "config.json makes it " + ShapeText(target.sizes().vec()) +
                                     ")");
    }
    const MappedFile& file = files_[found->second.file];
    if (!IsFloatingPoint(found->second.array.type) && target.is_floating_point()) {
      return Status::InvalidArgument(file.path() + ": tensor " + Quoted(name) + " holds " +
                                     ToString(found->second.array.type) +
                                     " elements; the model's weights are floating point");
    }
    const torch::Tensor source = MappedTensor(file, found->second.array);
    if (source.sizes() != target.sizes()) {
      return Status::InvalidArgument(file.path() + ": tensor " + Quoted(name) + " is " +
                                     ShapeText(source.sizes().vec()) + ", config.json makes it " +
                                     ShapeText(target.sizes().vec()));
    }
    target.copy_(source);
    unused.erase(found->first);
    return Status::Ok();
  };
  for (auto& item : module.named_parameters()) {
    if (Status s = load(item.key(), item.value()); !s.ok()) return s;
  }
  for (auto& item : module.named_buffers()) {
    if (Status s = load(item.key(), item.value()); !s.ok()) return s;
  }
  if (!unused.empty()) {
    std::string names;
    for (const std::string& name : unused) names += (names.empty() ? "" : ", ") + Quoted(name);
    return Status::InvalidArgument(folder_ +
                                   ": tensors the model (as config.json describes it) "
                                   "has no place for: " +
                                   names);
  }
  return Status::Ok();
}

}  // namespace trainerd
