#include "trainerd/trainer/evaluation/window_loss_tally.h"

#include <torch/torch.h>

#include <algorithm>

namespace trainerd {
namespace {

constexpr std::int64_t kPositionChunks = 16;  // as evaluation/prediction_tally.cc

}  // namespace

WindowLossTally::WindowLossTally(const LossSpec& loss, std::int64_t windows,
                                 std::int64_t terms_per_window)
    : loss_(loss),
      terms_per_window_(terms_per_window),
      sums_(torch::zeros({windows}, torch::kDouble)),
      terms_(torch::zeros({windows}, torch::kLong)) {}

void WindowLossTally::Add(const torch::Tensor& outputs, const torch::Tensor& targets) {
  if (loss_.kind == LossKind::kModule) return;
  const torch::NoGradGuard no_grad;
  const torch::Tensor flat = targets.reshape({-1});
  const std::int64_t positions = flat.size(0);
  torch::Tensor counted;
  torch::Tensor losses;  // per target element, float64
  if (loss_.kind == LossKind::kCrossEntropy) {
    counted = flat.ne(loss_.ignore_index);
    // -log_softmax at the target, kPositionChunks of the positions at a time (as the
    // prediction tally reads them: never the whole microbatch's fp32 copies at once). An
    // ignored or out-of-range target reads class 0 or the last (the loss refuses the latter).
    const torch::Tensor logits = outputs.reshape({positions, -1});
    const torch::Tensor classes = flat.masked_fill(~counted, 0).clamp(0, logits.size(1) - 1);
    const std::int64_t chunk = std::max<std::int64_t>(1, positions / kPositionChunks);
    std::vector<torch::Tensor> parts;
    for (std::int64_t start = 0; start < positions; start += chunk) {
      const std::int64_t size = std::min(chunk, positions - start);
      const torch::Tensor rows = logits.narrow(0, start, size).to(torch::kFloat);
      const torch::Tensor picked = rows.gather(1, classes.narrow(0, start, size).unsqueeze(1));
      parts.push_back((torch::logsumexp(rows, 1) - picked.squeeze(1)).to(torch::kDouble));
    }
    losses = torch::cat(parts).masked_fill_(~counted, 0);
  } else {
    counted = torch::ones_like(flat, torch::kBool);
    losses = (outputs.to(torch::kDouble) - targets.to(torch::kDouble)).square().reshape({-1});
  }
  const torch::Tensor window =
      torch::arange(seen_, seen_ + positions, torch::dtype(torch::kLong).device(losses.device()))
          .div(terms_per_window_, "floor");
  sums_ = sums_.to(losses.device()).index_add_(0, window, losses);
  terms_ = terms_.to(losses.device()).index_add_(0, window, counted.to(torch::kLong));
  seen_ += positions;
}

std::optional<WindowLosses> WindowLossTally::Result() const {
  if (loss_.kind == LossKind::kModule || seen_ != sums_.size(0) * terms_per_window_) {
    return std::nullopt;
  }
  const torch::Tensor sums = sums_.cpu().contiguous();
  if (!torch::isfinite(sums).all().item<bool>()) return std::nullopt;
  const torch::Tensor terms = terms_.cpu().contiguous();
  WindowLosses windows;
  windows.sums.assign(sums.data_ptr<double>(), sums.data_ptr<double>() + sums.numel());
  windows.terms.assign(terms.data_ptr<std::int64_t>(),
                       terms.data_ptr<std::int64_t>() + terms.numel());
  return windows;
}

}  // namespace trainerd
