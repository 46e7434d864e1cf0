#include "models/mlp/mlp_classifier.h"

#include "trainerd/trainer/models/model_registry.h"
#include "trainerd/trainer/semantics/sample_dropout.h"

namespace trainerd {

MlpClassifier::MlpClassifier(const MlpOptions& options, std::int64_t in_features,
                             std::int64_t classes)
    : options_(options) {
  std::int64_t width = in_features;
  for (int i = 0; i < options.layers; ++i) {
    torch::nn::Sequential block;
    block->push_back(torch::nn::Linear(width, options.hidden));
    if (options.batch_norm) block->push_back(torch::nn::BatchNorm1d(options.hidden));
    block->push_back(torch::nn::GELU());
    block->push_back(SampleDropout(options.dropout, /*site=*/i));
    blocks_.push_back(register_module("block" + std::to_string(i), block));
    width = options.hidden;
  }
  head_ = register_module("head", torch::nn::Linear(width, classes));
}

torch::Tensor MlpClassifier::forward(const torch::Tensor& features) {
  torch::Tensor x = features;
  for (int i = 0; i < num_blocks(); ++i) x = RunBlock(i, blocks_[static_cast<std::size_t>(i)], x);
  return head_->forward(x);
}

std::optional<FlopsPerSample> MlpClassifier::TrainingFlops() const {
  return FlopsPerSample{6.0 * static_cast<double>(CountParameters(*this)),
                        "formula: 6 x parameters"};
}

namespace {

// Byte histograms in, one logit per data slice out.
constexpr std::int64_t kHistogramBins = 256;

TRAINERD_REGISTER_MODEL("mlp", [](const ModelContext& context) {
  return std::make_shared<MlpClassifier>(context.options.get<MlpOptions>(), kHistogramBins,
                                         context.classes);
});

}  // namespace
}  // namespace trainerd
