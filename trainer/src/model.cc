#include "trainerd/trainer/model.h"

#include <torch/torch.h>

#include <algorithm>

#include "trainerd/trainer/gpt.h"
#include "trainerd/trainer/mlp_classifier.h"
#include "trainerd/trainer/torchscript_model.h"

namespace trainerd {

void TrainableModel::set_checkpointed_blocks(const std::vector<int>& blocks) {
  for (int index : blocks) {
    TORCH_CHECK(index >= 0 && index < num_blocks(), "checkpoint block ", index,
                " out of range for a model of ", num_blocks(), " blocks");
  }
  checkpointed_ = blocks;
  std::sort(checkpointed_.begin(), checkpointed_.end());
}

torch::Tensor TrainableModel::RunBlock(int index, const BlockFunction& block,
                                       const std::vector<torch::Tensor>& parameters,
                                       const std::vector<torch::Tensor>& buffers,
                                       const torch::Tensor& x) {
  if (block_observer_) block_observer_(index, false);
  torch::Tensor y;
  if (!IsCheckpointed(index) || !torch::GradMode::is_enabled()) {
    y = block(x);
  } else {
    y = CheckpointedForward(block, x, parameters, buffers, fresh_recompute_);
  }
  if (block_observer_) block_observer_(index, true);
  return y;
}

void TrainableModel::SaveArtifact(const std::string& path) {
  torch::serialize::OutputArchive archive;
  save(archive);
  archive.save_to(path);
}

bool TrainableModel::IsCheckpointed(int index) const {
  return std::binary_search(checkpointed_.begin(), checkpointed_.end(), index);
}

std::shared_ptr<TrainableModel> BuildModel(const ModelSpec& spec, int num_classes) {
  switch (spec.kind) {
    case ModelKind::kGpt:
      return std::make_shared<Gpt>(spec.gpt);
    case ModelKind::kMlpClassifier:
      return std::make_shared<MlpClassifier>(spec.mlp, /*in_features=*/256, num_classes);
    case ModelKind::kTorchScript:
      return std::make_shared<TorchScriptModel>(spec.torchscript);
  }
  TORCH_CHECK(false, "unknown model kind ", static_cast<int>(spec.kind));
}

std::int64_t CountParameters(const torch::nn::Module& model) {
  std::int64_t total = 0;
  for (const auto& p : model.parameters()) total += p.numel();
  return total;
}

Status CheckModelFitsData(const ModelSpec& spec, const std::string& origin, const Dataset& data) {
  const bool histogram = spec.kind == ModelKind::kMlpClassifier ||
                         (spec.kind == ModelKind::kTorchScript &&
                          spec.torchscript.inputs == ModelInputs::kByteHistogram);
  if (histogram && !data.supports(SampleFormat::kSliceOfWindow)) {
    return Status::InvalidArgument(origin + ": " +
                                   (spec.kind == ModelKind::kMlpClassifier
                                        ? std::string("model.kind: mlp")
                                        : std::string("model.inputs: byte_histogram")) +
                                   " counts the bytes of text windows, but data.format: tokens "
                                   "gives token ids; use data.format: text");
  }
  const auto needs = [&](const std::string& key, std::int64_t have, std::int64_t need,
                         const std::string& what) -> Status {
    if (have >= need) return Status::Ok();
    return Status::InvalidArgument(origin + ": " + key + ": " + what + " " + std::to_string(need) +
                                   ", got " + std::to_string(have));
  };
  const std::string ids = "the data's token ids go up to " +
                          std::to_string(data.vocabulary_needed() - 1) + ": expected at least";
  switch (spec.kind) {
    case ModelKind::kGpt:
      return needs("model.vocab_size", spec.gpt.vocab_size, data.vocabulary_needed(), ids);
    case ModelKind::kMlpClassifier:
      return Status::Ok();  // its head is sized by the slices
    case ModelKind::kTorchScript:
      return histogram ? needs("model.path", spec.torchscript.output_size,
                               static_cast<std::int64_t>(data.slices().size()),
                               "classifier logits need one class per data file: expected at least")
                       : needs("model.path", spec.torchscript.output_size, data.vocabulary_needed(),
                               "the model's logits cover its vocabulary, and " + ids);
  }
  return Status::Ok();
}

LossTerms CrossEntropySum(const torch::Tensor& logits, const torch::Tensor& targets) {
  const torch::Tensor flat_targets = targets.reshape({-1});
  LossTerms terms;
  terms.sum = torch::nn::functional::cross_entropy(
      logits.reshape({-1, logits.size(-1)}).to(torch::kFloat), flat_targets,
      torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-1).reduction(torch::kSum));
  terms.count = flat_targets.ne(-1).sum().item<std::int64_t>();
  return terms;
}

}  // namespace trainerd
