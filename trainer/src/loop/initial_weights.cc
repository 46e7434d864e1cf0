#include "trainerd/trainer/loop/initial_weights.h"

#include <torch/torch.h>

#include <filesystem>
#include <map>
#include <set>

#include "trainerd/common/array_file.h"
#include "trainerd/common/sha256.h"
#include "trainerd/trainer/data/array_tensor.h"
#include "trainerd/trainer/data/mapped_file.h"
#include "trainerd/trainer/models/build_model.h"

namespace trainerd {

std::string InitialWeightsFile(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return (std::filesystem::path(path) / "model.safetensors").string();
  }
  return path;
}

namespace {

// Why the stored `array` cannot become `tensor` ("" when it can).
std::string Mismatch(const ArrayView& array, const torch::Tensor& tensor) {
  if (array.shape != tensor.sizes().vec()) {
    return "shape " + ShapeText(array.shape) + " in the file, " + ShapeText(tensor.sizes().vec()) +
           " in the model";
  }
  if (IsFloatingPoint(array.type) != tensor.is_floating_point()) {
    return std::string(ToString(array.type)) + " in the file, " +
           c10::toString(tensor.scalar_type()) + " in the model";
  }
  return "";
}

}  // namespace

Status LoadInitialWeights(const std::string& path, TrainableModel* model) {
  Result<MappedFile> file = MappedFile::Open(path, /*access_random=*/false);
  if (!file.ok()) return Status::InvalidArgument("init_from: " + file.status().message());
  Result<std::map<std::string, ArrayView>> stored =
      ReadSafetensorsHeader(file->data(), file->size(), path);
  if (!stored.ok()) return Status::InvalidArgument("init_from: " + stored.status().message());
  const std::string where = "init_from: " + path + ": ";
  std::set<std::string> unused;
  for (const auto& entry : *stored) unused.insert(entry.first);
  torch::NoGradGuard no_grad;
  for (const auto& [name, tensor] : model->StateDict()) {
    const auto it = stored->find(name);
    if (it == stored->end()) {
      return Status::InvalidArgument(where + "has no tensor '" + name +
                                     "' of this model (a release of another model?)");
    }
    if (const std::string mismatch = Mismatch(it->second, tensor); !mismatch.empty()) {
      return Status::InvalidArgument(where + "tensor '" + name + "': " + mismatch);
    }
    tensor.copy_(MappedTensor(*file, it->second));
    unused.erase(name);
  }
  if (!unused.empty()) {
    return Status::InvalidArgument(where + "tensor '" + *unused.begin() +
                                   "' is not in this model (a release of another model?)");
  }
  return Status::Ok();
}

Status ResolveInitialWeights(const std::string& flag, int num_classes, JobSpec* spec) {
  InitSpec& init = spec->init_from;
  if (flag == "none") {
    init = InitSpec{};
    return Status::Ok();
  }
  if (!flag.empty()) init = {/*current_release=*/false, std::filesystem::absolute(flag), ""};
  if (init.current_release) {
    return Status::InvalidArgument(
        spec->source_path + ": init_from: " + kInitFromCurrentRelease +
        " names trainerd's current release, which only the daemon knows: give trainer-run "
        "--init-from FILE (a release folder or its model.safetensors) or --init-from none");
  }
  if (init.path.empty()) return Status::Ok();
  init.path = InitialWeightsFile(init.path);
  std::shared_ptr<TrainableModel> model = BuildModel(spec->model, num_classes, spec->source_path);
  if (Status s = LoadInitialWeights(init.path, model.get()); !s.ok()) {
    return Status::InvalidArgument(spec->source_path + ": " + s.message());
  }
  Result<std::string> hash = Sha256File(init.path);
  if (!hash.ok()) return hash.status();
  init.sha256 = *hash;
  return Status::Ok();
}

}  // namespace trainerd
