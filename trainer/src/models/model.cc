#include "trainerd/trainer/models/model.h"

#include <torch/torch.h>

#include <algorithm>

#include "models/gpt/gpt.h"
#include "models/mlp/mlp_classifier.h"
#include "models/plugin/plugin_library.h"
#include "models/torchscript/torchscript_model.h"

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

LossTerms TrainableModel::Loss(const torch::Tensor& outputs, const torch::Tensor& targets) {
  return BuiltInLoss(loss_, outputs, targets);
}

void TrainableModel::SaveArtifact(const std::string& path) {
  torch::serialize::OutputArchive archive;
  save(archive);
  archive.save_to(path);
}

std::vector<std::pair<std::string, torch::Tensor>> TrainableModel::StateDict() const {
  std::vector<std::pair<std::string, torch::Tensor>> state;
  for (const auto& p : named_parameters()) state.emplace_back(p.key(), p.value());
  for (const auto& b : named_buffers()) state.emplace_back(b.key(), b.value());
  return state;
}

bool TrainableModel::IsCheckpointed(int index) const {
  return std::binary_search(checkpointed_.begin(), checkpointed_.end(), index);
}

namespace {

std::shared_ptr<TrainableModel> ModelOfKind(const ModelSpec& spec, int num_classes) {
  switch (spec.kind) {
    case ModelKind::kGpt:
      return std::make_shared<Gpt>(spec.gpt);
    case ModelKind::kMlpClassifier:
      return std::make_shared<MlpClassifier>(spec.mlp, /*in_features=*/256, num_classes);
    case ModelKind::kTorchScript:
      return std::make_shared<TorchScriptModel>(spec.torchscript, spec.own.inputs);
    case ModelKind::kPlugin:
      return BuildPluginModel(spec);
  }
  TORCH_CHECK(false, "unknown model kind ", static_cast<int>(spec.kind));
}

}  // namespace

std::shared_ptr<TrainableModel> BuildModel(const ModelSpec& spec, int num_classes) {
  std::shared_ptr<TrainableModel> model = ModelOfKind(spec, num_classes);
  model->set_loss(spec.loss);
  return model;
}

std::int64_t CountParameters(const torch::nn::Module& model) {
  std::int64_t total = 0;
  for (const auto& p : model.parameters()) total += p.numel();
  return total;
}

SampleFormat FormatRead(const ModelSpec& spec) {
  switch (spec.kind) {
    case ModelKind::kGpt:
      return SampleFormat::kNextToken;
    case ModelKind::kMlpClassifier:
      return SampleFormat::kSliceOfWindow;
    case ModelKind::kTorchScript:
    case ModelKind::kPlugin:
      break;
  }
  return FormatOf(spec.own.inputs);
}

SampleFormat FormatOf(ModelInputs inputs) {
  switch (inputs) {
    case ModelInputs::kTokens:
      return SampleFormat::kNextToken;
    case ModelInputs::kByteHistogram:
      return SampleFormat::kSliceOfWindow;
    case ModelInputs::kRows:
      return SampleFormat::kRows;
  }
  return SampleFormat::kNextToken;
}

namespace {

// Why a model of `spec` cannot read data that lacks its format, and what to change.
std::string FormatMismatch(const ModelSpec& spec, const Dataset& data) {
  const bool own = spec.kind == ModelKind::kTorchScript || spec.kind == ModelKind::kPlugin;
  const std::string reader = own ? std::string("model.inputs: ") + ToString(spec.own.inputs)
                                 : std::string("model.kind: ") + ToString(spec.kind);
  if (data.supports(SampleFormat::kRows)) {
    return own ? "data.format: tensors gives rows, not what " + reader +
                     " reads; use model.inputs: rows (the default for tensors data)"
               : "data.format: tensors needs model.kind: torchscript or plugin (a model that reads "
                 "rows); " +
                     reader + " reads text or token windows";
  }
  if (FormatRead(spec) == SampleFormat::kRows) {
    return reader + " reads the rows of data.format: tensors; this data gives windows";
  }
  return reader +
         " counts the bytes of text windows, but data.format: tokens gives token ids; use "
         "data.format: text";
}

}  // namespace

Status CheckModelFitsData(const ModelSpec& spec, const std::string& origin, const Dataset& data) {
  const SampleFormat reads = FormatRead(spec);
  if (!data.supports(reads)) {
    return Status::InvalidArgument(origin + ": " + FormatMismatch(spec, data));
  }
  const auto needs = [&](const std::string& key, std::int64_t have, std::int64_t need,
                         const std::string& what) -> Status {
    if (have >= need) return Status::Ok();
    return Status::InvalidArgument(origin + ": " + key + ": " + what + " " + std::to_string(need) +
                                   ", got " + std::to_string(have));
  };
  const std::int64_t largest = data.vocabulary_needed() - 1;
  const std::string ids =
      "the data's token ids go up to " + std::to_string(largest) + ": expected at least";
  const std::int64_t outputs = spec.own.output_size;
  const std::string file = spec.kind == ModelKind::kPlugin ? "model.library" : "model.path";
  switch (reads) {
    case SampleFormat::kNextToken:
      return spec.kind == ModelKind::kGpt
                 ? needs("model.vocab_size", spec.gpt.vocab_size, data.vocabulary_needed(), ids)
                 : needs(file, outputs, data.vocabulary_needed(),
                         "the model's logits cover its vocabulary, and " + ids);
    case SampleFormat::kSliceOfWindow:  // the built-in classifier's head is sized by the slices
      return spec.kind == ModelKind::kMlpClassifier
                 ? Status::Ok()
                 : needs(file, outputs, static_cast<std::int64_t>(data.slices().size()),
                         "classifier logits need one class per data file: expected at least");
    case SampleFormat::kRows:  // mse and a module's loss: shapes checked on a sample
      if (spec.loss.kind != LossKind::kCrossEntropy) return Status::Ok();
      return needs(file, outputs, data.vocabulary_needed(),
                   "the data's class targets go up to " + std::to_string(largest) +
                       ": expected logits [B, C] with C at least");
  }
  return Status::Ok();
}

}  // namespace trainerd
