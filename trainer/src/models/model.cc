#include "trainerd/trainer/models/model.h"

#include <torch/torch.h>

#include <algorithm>
#include <optional>

#include "trainerd/trainer/device/torch_compat.h"
#include "trainerd/trainer/semantics/activation_offload.h"
#include "trainerd/trainer/semantics/document_positions.h"

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
  if (!torch::GradMode::is_enabled()) {
    y = block(x);
  } else if (!IsCheckpointed(index)) {
    std::optional<ActivationOffloadScope> offload;
    if (offload_activations_) {
      offload.emplace(parameters, buffers, fault_ == TrainingFault::kOffloadRestoredStale);
    }
    y = block(x);
  } else {
    y = CheckpointedForward(block, x, parameters, buffers,
                            fault_ == TrainingFault::kRecomputeFreshRng);
  }
  if (block_observer_) block_observer_(index, true);
  return y;
}

LossTerms TrainableModel::Loss(const torch::Tensor& outputs, const torch::Tensor& targets) {
  return BuiltInLoss(loss_, outputs, targets);
}

LossTerms TrainableModel::ForwardLoss(const Batch& batch, const OutputsObserver& observe) {
  const torch::Tensor& inputs = batch.inputs;
  const torch::Tensor& targets = batch.targets;
  const DocumentPositionsScope documents(batch.positions);
  // The blocks' weights autocast cached (a checkpointed block's too, cast without a graph)
  // are no longer needed once their products are: dropped, as the forward's autocast scope
  // would drop them at its end.
  std::vector<torch::Tensor> output_layer = output_layer_parameters();
  if (output_layer.empty()) {
    const torch::Tensor outputs = forward(inputs);
    at::autocast::clear_cache();
    if (observe) observe(outputs, targets);
    return LossOutsideAutocast(outputs, targets);
  }
  const torch::Tensor hidden = Hidden(inputs);
  at::autocast::clear_cache();
  if (block_observer_) block_observer_(num_blocks(), false);
  LossTerms terms;
  if (output_chunk_ > 0 && loss_.kind == LossKind::kCrossEntropy) {
    const ChunkedOutput chunked{[this](const torch::Tensor& h) { return OutputLogits(h); },
                                std::move(output_layer), output_chunk_, loss_.ignore_index,
                                fault_ == TrainingFault::kChunkDropsAToken};
    terms = ChunkedCrossEntropy(chunked, hidden, targets, observe);
  } else {
    const torch::Tensor logits = OutputLogits(hidden);
    if (observe) observe(logits, targets);
    terms = LossOutsideAutocast(logits, targets);
  }
  if (block_observer_) block_observer_(num_blocks(), true);
  return terms;
}

LossTerms TrainableModel::LossOutsideAutocast(const torch::Tensor& outputs,
                                              const torch::Tensor& targets) {
  const compat::AutocastScope off(outputs.device().type(), compat::AutocastState{});
  return Loss(outputs, targets);
}

torch::Tensor TrainableModel::Hidden(const torch::Tensor& /*inputs*/) {
  TORCH_CHECK(false, "this model has no output layer to split its forward at");
}

torch::Tensor TrainableModel::OutputLogits(const torch::Tensor& /*hidden*/) {
  TORCH_CHECK(false, "this model has no output layer to split its forward at");
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

std::int64_t CountParameters(const torch::nn::Module& model) {
  std::int64_t total = 0;
  for (const auto& p : model.parameters()) total += p.numel();
  return total;
}

std::vector<torch::Tensor> TrainableParameters(const torch::nn::Module& model) {
  std::vector<torch::Tensor> trainable;
  for (const torch::Tensor& p : model.parameters()) {
    if (p.requires_grad()) trainable.push_back(p);
  }
  return trainable;
}

torch::OrderedDict<std::string, torch::Tensor> NamedTrainableParameters(
    const torch::nn::Module& model) {
  torch::OrderedDict<std::string, torch::Tensor> trainable;
  for (const auto& p : model.named_parameters()) {
    if (p.value().requires_grad()) trainable.insert(p.key(), p.value());
  }
  return trainable;
}

std::int64_t CountTrainableParameters(const torch::nn::Module& model) {
  std::int64_t total = 0;
  for (const torch::Tensor& p : TrainableParameters(model)) total += p.numel();
  return total;
}

SampleFormat SampleFormatOf(ModelInputs inputs) {
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

}  // namespace trainerd
