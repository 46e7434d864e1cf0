#include "trainerd/trainer/evaluation/simple_baseline.h"

#include <torch/torch.h>

#include <algorithm>

namespace trainerd {
namespace {

constexpr std::int64_t kFitChunk = 64;  // samples read at a time

}  // namespace

std::optional<SimpleBaseline> SimpleBaseline::Fit(const LossSpec& loss, const Dataset& data,
                                                  SampleFormat format, std::uint64_t seed,
                                                  std::int64_t classes) {
  if (loss.kind == LossKind::kModule) return std::nullopt;
  const bool frequencies = loss.kind == LossKind::kCrossEntropy;
  torch::Tensor sum;  // class counts, or the targets' sum
  std::int64_t terms = 0;
  std::int64_t samples = 0;
  std::int64_t inputs = 0;
  while (terms < kFitTerms && samples < kMaxFitSamples && inputs < kMaxFitInputs) {
    const Batch batch = data.TrainingSamples(seed, samples, kFitChunk, format);
    samples += batch.samples;
    inputs += batch.inputs.numel();
    if (frequencies) {
      const torch::Tensor targets = batch.targets.reshape({-1});
      const torch::Tensor kept = targets.masked_select(targets.ne(loss.ignore_index));
      const torch::Tensor counts =
          torch::bincount(kept.clamp(0, classes - 1), {}, classes).to(torch::kDouble);
      sum = sum.defined() ? sum + counts : counts;
      terms += kept.numel();
    } else {
      const torch::Tensor rows = batch.targets.to(torch::kDouble).sum(0);
      sum = sum.defined() ? sum + rows : rows;
      terms += batch.targets.numel();
    }
  }
  SimpleBaseline baseline;
  baseline.loss_ = loss;
  if (frequencies) {
    baseline.log_probabilities_ =
        ((sum + 1) / static_cast<double>(terms + classes)).log();  // add-one smoothed
    baseline.description_ = "class frequencies of " + std::to_string(terms) + " training targets";
  } else {
    baseline.mean_ = sum / static_cast<double>(samples);
    baseline.description_ = "the mean of " + std::to_string(samples) + " training rows";
  }
  return baseline;
}

LossTerms SimpleBaseline::Loss(const torch::Tensor& targets) const {
  LossTerms terms;
  if (loss_.kind == LossKind::kCrossEntropy) {
    const torch::Tensor flat = targets.reshape({-1});
    const torch::Tensor kept = flat.masked_select(flat.ne(loss_.ignore_index));
    const torch::Tensor log_p = log_probabilities_.to(targets.device());
    terms.sum = -log_p.index_select(0, kept.clamp(0, log_p.size(0) - 1)).sum();
    terms.count = kept.numel();
  } else {
    terms.sum = (targets.to(torch::kDouble) - mean_.to(targets.device())).square().sum();
    terms.count = targets.numel();
  }
  return terms;
}

}  // namespace trainerd
