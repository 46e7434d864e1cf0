#include "models/hf/hf_index_spec.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "trainerd/common/bounded_file.h"
#include "trainerd/common/json_input.h"

namespace trainerd {
namespace {

// An index larger than this is no index: Llama-3.1-405B's is ~100 KB.
constexpr std::size_t kMaxIndexBytes = 16 << 20;

// Whether `shard` names a file of the folder itself, as save_pretrained writes them: not a
// path into another folder, not the folder or its parent.
bool IsFileOfTheFolder(const std::string& shard) {
  return !shard.empty() && shard != "." && shard != ".." && shard.find('/') == std::string::npos &&
         shard.find('\0') == std::string::npos;
}

}  // namespace

Result<std::map<std::string, std::vector<std::string>>> ReadHfIndex(const std::string& path) {
  Result<std::string> text = ReadBoundedFile(path, kMaxIndexBytes);
  if (!text.ok()) return text.status();
  const nlohmann::json json = ParseBoundedJson(*text);
  if (!json.is_object() || !json.contains("weight_map") || !json["weight_map"].is_object()) {
    return Status::InvalidArgument(path +
                                   ": weight_map: expected an object of tensor names to "
                                   "shard files");
  }
  std::map<std::string, std::vector<std::string>> shards;
  for (const auto& [tensor, shard] : json["weight_map"].items()) {
    if (!shard.is_string()) {
      return Status::InvalidArgument(path + ": weight_map." + tensor +
                                     ": expected a file name, got " + shard.dump());
    }
    if (!IsFileOfTheFolder(shard.get<std::string>())) {
      return Status::InvalidArgument(path + ": weight_map." + tensor +
                                     ": expected the name of a file in the folder, got " +
                                     shard.dump());
    }
    shards[shard.get<std::string>()].push_back(tensor);
  }
  return shards;
}

Result<std::map<std::string, std::vector<std::string>>> HfWeightFiles(const std::string& folder) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(fs::path(folder) / kHfWeightsFile, ec)) {
    return std::map<std::string, std::vector<std::string>>{{kHfWeightsFile, {}}};
  }
  const std::string index = (fs::path(folder) / kHfIndexFile).string();
  if (fs::exists(index, ec)) return ReadHfIndex(index);
  return Status::InvalidArgument(folder + ": no " + kHfWeightsFile + " and no " + kHfIndexFile +
                                 ": the folder has no weights");
}

}  // namespace trainerd
