// The one place for LibTorch calls whose API moved between 1.13 (Debian, CPU) and 2.x
// (CUDA users): generators now; autocast and allocators join them as they are used.
#pragma once

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>
#include <torch/types.h>

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

}  // namespace trainerd::compat
