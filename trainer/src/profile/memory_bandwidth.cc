#include "profile/memory_bandwidth.h"

#include <torch/torch.h>

#include <algorithm>

#include "trainerd/trainer/device/device_timer.h"

namespace trainerd {

double MeasureMemoryBandwidth(const torch::Device& device, std::int64_t array_bytes) {
  torch::NoGradGuard no_grad;
  const std::int64_t n = array_bytes / 4;
  const auto options = torch::TensorOptions().dtype(torch::kFloat32).device(device);
  torch::Tensor a = torch::zeros({n}, options);
  const torch::Tensor b = torch::rand({n}, options);
  const torch::Tensor c = torch::rand({n}, options);
  const double bytes = static_cast<double>(n) * 4;
  double best = 0;
  for (int rep = 0; rep < 6; ++rep) {  // the first of each is a warm-up
    DeviceTimer copy(device);
    a.copy_(b);
    const double copy_seconds = copy.Seconds();
    DeviceTimer triad(device);
    at::add_out(a, b, c, /*alpha=*/3.0);
    const double triad_seconds = triad.Seconds();
    if (rep == 0) continue;
    best = std::max({best, 2 * bytes / copy_seconds, 3 * bytes / triad_seconds});
  }
  return best;
}

}  // namespace trainerd
