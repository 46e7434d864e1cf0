// The one place for LibTorch calls whose API moved between 1.13 (Debian, CPU) and 2.x
// (CUDA users): generators and autocast. Allocators join them with the memory budget.
#pragma once

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/Generator.h>
#include <torch/types.h>
#include <torch/version.h>

#include <mutex>

namespace trainerd::compat {

// Snapshot of the default CPU generator (dropout masks, initialisation) as a byte tensor.
inline torch::Tensor CpuRngState() {
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get_state();
}

inline void SetCpuRngState(const torch::Tensor& state) {
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(state);
}

// Autocast state of one device type (CPU or CUDA) on the current thread.
struct AutocastState {
  bool enabled = false;
  at::ScalarType dtype = at::kBFloat16;
};

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
inline AutocastState GetAutocast(at::DeviceType device) {
  return {at::autocast::is_autocast_enabled(device), at::autocast::get_autocast_dtype(device)};
}
inline void SetAutocast(at::DeviceType device, const AutocastState& state) {
  at::autocast::set_autocast_enabled(device, state.enabled);
  at::autocast::set_autocast_dtype(device, state.dtype);
}
#else
inline AutocastState GetAutocast(at::DeviceType device) {
  if (device == at::kCUDA)
    return {at::autocast::is_enabled(), at::autocast::get_autocast_gpu_dtype()};
  return {at::autocast::is_cpu_enabled(), at::autocast::get_autocast_cpu_dtype()};
}
inline void SetAutocast(at::DeviceType device, const AutocastState& state) {
  if (device == at::kCUDA) {
    at::autocast::set_enabled(state.enabled);
    at::autocast::set_autocast_gpu_dtype(state.dtype);
  } else {
    at::autocast::set_cpu_enabled(state.enabled);
    at::autocast::set_autocast_cpu_dtype(state.dtype);
  }
}
#endif

// RAII autocast region, as Python's `with torch.autocast(...)`: sets the state for `device`,
// and on exit restores the previous state and drops the cast-weight cache once the
// outermost region closes (otherwise low-precision weight copies would stay alive).
class AutocastScope {
 public:
  AutocastScope(at::DeviceType device, AutocastState state)
      : device_(device), previous_(GetAutocast(device)) {
    SetAutocast(device_, state);
    at::autocast::increment_nesting();
  }
  ~AutocastScope() {
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    SetAutocast(device_, previous_);
  }
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  at::DeviceType device_;
  AutocastState previous_;
};

}  // namespace trainerd::compat
