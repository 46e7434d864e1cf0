#include "trainerd/trainer/device/device_timer.h"

#include <torch/cuda.h>

namespace trainerd {

void SynchronizeDevice(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.has_index() ? device.index() : -1);
}

DeviceTimer::DeviceTimer(const torch::Device& device) : device_(device) { Restart(); }

double DeviceTimer::Seconds() const {
  SynchronizeDevice(device_);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void DeviceTimer::Restart() {
  SynchronizeDevice(device_);
  start_ = std::chrono::steady_clock::now();
}

}  // namespace trainerd
