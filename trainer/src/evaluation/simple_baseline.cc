#include "trainerd/trainer/evaluation/simple_baseline.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <functional>

namespace trainerd {
namespace {

constexpr std::int64_t kFitChunk = 64;  // samples read at a time

// The add-k smoothing searched: k from 1e-4 to 100, a grid of kGridPoints in log k, then a
// golden-section search between the best point's neighbours.
constexpr double kLowestLogK = -9.2103403719761836;  // log(1e-4)
constexpr double kHighestLogK = 4.6051701859880914;  // log(100)
constexpr int kGridPoints = 29;
constexpr int kGoldenSteps = 40;

// The mean cross-entropy of add-k smoothed frequencies, log k = `log_k`, on targets whose
// classes have training counts `counts` and make up `shares` of the targets:
// -sum share x log((count + k) / (terms + k x classes)).
double AddKLoss(const torch::Tensor& counts, const torch::Tensor& shares, double terms,
                double classes, double log_k) {
  const double k = std::exp(log_k);
  return std::log(terms + k * classes) - (shares * (counts + k).log()).sum().item<double>();
}

// The smallest value of `loss` over log k in [kLowestLogK, kHighestLogK]: the grid's best
// point, then the golden section between its neighbours.
double SmallestOverLogK(const std::function<double(double)>& loss) {
  const double step = (kHighestLogK - kLowestLogK) / (kGridPoints - 1);
  int best = 0;
  double best_loss = loss(kLowestLogK);
  for (int i = 1; i < kGridPoints; ++i) {
    const double at = loss(kLowestLogK + i * step);
    if (at < best_loss) {
      best = i;
      best_loss = at;
    }
  }
  double low = kLowestLogK + std::max(best - 1, 0) * step;
  double high = kLowestLogK + std::min(best + 1, kGridPoints - 1) * step;
  const double golden = (std::sqrt(5.0) - 1) / 2;
  for (int i = 0; i < kGoldenSteps; ++i) {
    const double left = high - golden * (high - low);
    const double right = low + golden * (high - low);
    if (loss(left) < loss(right)) {
      high = right;
    } else {
      low = left;
    }
  }
  return std::min(best_loss, loss((low + high) / 2));
}

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
    baseline.counts_ = sum;
    baseline.terms_ = terms;
    baseline.description_ = "class frequencies of " + std::to_string(terms) +
                            " training targets, add-k smoothed with the k best on each slice";
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
    terms.count = kept.numel();
    terms.sum = torch::zeros({}, torch::dtype(torch::kDouble).device(targets.device()));
    if (terms.count == 0) return terms;
    // Each class the slice holds, once, with its share of the targets: the search over k
    // then costs the classes seen, not the targets.
    const std::int64_t classes = counts_.size(0);
    const torch::Tensor seen = torch::bincount(kept.cpu().clamp(0, classes - 1), {}, classes);
    const torch::Tensor present = seen.nonzero().reshape({-1});
    const torch::Tensor shares =
        seen.index_select(0, present).to(torch::kDouble) / static_cast<double>(terms.count);
    const torch::Tensor counts = counts_.index_select(0, present);
    const auto loss = [&](double log_k) {
      return AddKLoss(counts, shares, static_cast<double>(terms_), static_cast<double>(classes),
                      log_k);
    };
    terms.sum.fill_(SmallestOverLogK(loss) * static_cast<double>(terms.count));
  } else {
    terms.sum = (targets.to(torch::kDouble) - mean_.to(targets.device())).square().sum();
    terms.count = targets.numel();
  }
  return terms;
}

}  // namespace trainerd
