// Timing of device work. CUDA kernels run asynchronously to the host: a clock read right
// after a launch measures the launch, not the work. The timer synchronises the device before
// it reads the clock, at the start and at every reading (a no-op on the CPU).
// Not thread-safe; cheap to construct.
#pragma once

#include <torch/types.h>

#include <chrono>

namespace trainerd {

// Waits until all work queued on `device` has finished (CUDA); returns at once on the CPU.
void SynchronizeDevice(const torch::Device& device);

class DeviceTimer {
 public:
  // Synchronises `device`, then starts the clock.
  explicit DeviceTimer(const torch::Device& device);
  // Synchronises `device`, then returns the seconds since construction or the last Restart().
  double Seconds() const;
  // Synchronises `device`, then starts the clock again.
  void Restart();

 private:
  torch::Device device_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace trainerd
