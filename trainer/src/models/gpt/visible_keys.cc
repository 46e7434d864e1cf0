#include "models/gpt/visible_keys.h"

#include <torch/torch.h>

namespace trainerd {

torch::Tensor SlidingWindowFirstKeys(std::int64_t t, std::int64_t window) {
  if (window <= 0 || window >= t) return {};
  return (torch::arange(t, torch::kLong) - (window - 1)).clamp_min(0).unsqueeze(0);
}

torch::Tensor FirstVisibleKeys(const torch::Tensor& positions, std::int64_t t,
                               std::int64_t window) {
  const torch::Tensor windowed = SlidingWindowFirstKeys(t, window);
  if (!positions.defined()) return windowed;
  const torch::Tensor document = torch::arange(t, torch::kLong).unsqueeze(0) - positions;
  return windowed.defined() ? torch::maximum(document, windowed) : document;
}

torch::Tensor VisibleKeyMask(const torch::Tensor& first, torch::Device device) {
  const std::int64_t t = first.size(-1);
  const torch::Tensor keys =
      torch::arange(t, torch::TensorOptions().dtype(torch::kLong).device(device)).view({1, 1, t});
  const torch::Tensor queries = keys.view({1, t, 1});
  const torch::Tensor starts = first.to(device).view({first.size(0), t, 1});
  return keys.le(queries).logical_and(keys.ge(starts)).unsqueeze(1);
}

}  // namespace trainerd
