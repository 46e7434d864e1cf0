// The one place for LibTorch calls whose API moved between 1.13 (Debian, CPU) and 2.x (the
// PyPI wheel, CUDA): generators, autocast, the allocator interfaces and their statistics,
// fused attention, and the CUDA runtime queries. Everything else in the trainer is written
// once against the API both versions share.
//
// TRAINERD_WITH_CUDA is defined (PUBLIC, for every target that includes this header) where
// LibTorch was built with CUDA; the CUDA parts are then compiled, and run only when a device
// is present.
#pragma once

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/Generator.h>
#include <c10/core/Allocator.h>
#include <torch/types.h>
#include <torch/version.h>

#include <cstdint>
#include <mutex>
#include <string>

#ifdef TRAINERD_WITH_CUDA
#include <ATen/Context.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_runtime_api.h>
#endif

#define TRAINERD_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||           \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

// c10d's collective interface: ProcessGroup in 1.13, Backend (under ProcessGroup) in 2.x.
// Declared here, defined by torch/csrc/distributed/c10d/ (included by data_parallel.cc only).
namespace c10d {
class ProcessGroup;
class Backend;
}  // namespace c10d

namespace trainerd::compat {

// ---- Generators ------------------------------------------------------------------------------

// The generator states dropout (and initialisation) draw from on one device: the default CPU
// generator always, and the default generator of `device` when it is a CUDA device.
struct RngState {
  torch::Tensor cpu;
  torch::Tensor cuda;  // undefined unless captured on a CUDA device
  c10::DeviceIndex cuda_device = -1;
};

namespace detail {
inline torch::Tensor GetState(at::Generator generator) {
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get_state();
}
inline void SetState(at::Generator generator, const torch::Tensor& state) {
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(state);
}
}  // namespace detail

#ifdef TRAINERD_WITH_CUDA
// The index of a CUDA device, the current device where `device` names none ("cuda").
inline c10::DeviceIndex CudaIndexOf(const torch::Device& device) {
  return device.has_index() ? device.index() : c10::cuda::current_device();
}
#endif

inline RngState CaptureRng(const torch::Device& device) {
  RngState state;
  state.cpu = detail::GetState(at::detail::getDefaultCPUGenerator());
#ifdef TRAINERD_WITH_CUDA
  if (device.is_cuda()) {
    state.cuda_device = CudaIndexOf(device);
    state.cuda = detail::GetState(at::cuda::detail::getDefaultCUDAGenerator(state.cuda_device));
  }
#else
  TORCH_CHECK(!device.is_cuda(), "this LibTorch has no CUDA");
#endif
  return state;
}

// Restores what CaptureRng() took. A CUDA state needs a LibTorch with CUDA.
inline void RestoreRng(const RngState& state) {
  if (state.cpu.defined()) detail::SetState(at::detail::getDefaultCPUGenerator(), state.cpu);
  if (!state.cuda.defined()) return;
#ifdef TRAINERD_WITH_CUDA
  detail::SetState(at::cuda::detail::getDefaultCUDAGenerator(state.cuda_device), state.cuda);
#else
  TORCH_CHECK(false, "a CUDA generator state cannot be restored: this LibTorch has no CUDA");
#endif
}

// A new generator of `device` (CPU or CUDA) seeded with `seed`, shared with nobody.
inline at::Generator MakeGenerator(const torch::Device& device, std::uint64_t seed) {
#ifdef TRAINERD_WITH_CUDA
  if (device.is_cuda()) {
    at::Generator generator = at::make_generator<at::CUDAGeneratorImpl>(CudaIndexOf(device));
    generator.set_current_seed(seed);
    return generator;
  }
#else
  TORCH_CHECK(!device.is_cuda(), "this LibTorch has no CUDA");
#endif
  return at::make_generator<at::CPUGeneratorImpl>(seed);
}

// ---- Autocast --------------------------------------------------------------------------------

// Autocast state of one device type (CPU or CUDA) on the current thread.
struct AutocastState {
  bool enabled = false;
  at::ScalarType dtype = at::kBFloat16;
};

#if TRAINERD_TORCH_AT_LEAST(2, 4)
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

// ---- CPU allocator ---------------------------------------------------------------------------

// c10::Allocator::allocate lost its `const` and gained a pure virtual copy_data in 2.3. A CPU
// allocator derives from this and implements Allocate(). The static_asserts check the
// version guard against the header actually compiled.
class CpuAllocatorBase : public c10::Allocator {
 public:
#if TRAINERD_TORCH_AT_LEAST(2, 3)
  c10::DataPtr allocate(std::size_t n) override { return Allocate(n); }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
#else
  c10::DataPtr allocate(std::size_t n) const override { return Allocate(n); }
#endif

 protected:
  virtual c10::DataPtr Allocate(std::size_t n) const = 0;
};

namespace detail {
template <class A>
concept ConstAllocate = requires(const A& a) {
  a.allocate(std::size_t{0});
};
template <class A>
concept HasCopyData = requires(const A& a) {
  a.copy_data(nullptr, nullptr, std::size_t{0});
};
static_assert(ConstAllocate<c10::Allocator> != TRAINERD_TORCH_AT_LEAST(2, 3),
              "c10::Allocator::allocate changed constness in another release: fix the guard");
static_assert(HasCopyData<c10::Allocator> == TRAINERD_TORCH_AT_LEAST(2, 3),
              "c10::Allocator::copy_data appeared in another release: fix the guard");
}  // namespace detail

// ---- Fused attention -------------------------------------------------------------------------

// Whether this LibTorch has at::scaled_dot_product_attention (2.0 and later).
inline constexpr bool kHasFusedAttention = TRAINERD_TORCH_AT_LEAST(2, 0);

// Causal attention of q, k, v [B, H, T, D] through LibTorch's fused kernel, dropout
// probability `dropout` on the attention weights (0 outside training). `visible`, when
// defined, is the bool mask of the keys each query attends to (causality included, [B or 1,
// 1, T, T]: a sliding window's). Only where kHasFusedAttention; callers keep the explicit
// formula for 1.13.
inline torch::Tensor FusedCausalAttention(const torch::Tensor& q, const torch::Tensor& k,
                                          const torch::Tensor& v, double dropout,
                                          const torch::Tensor& visible = {}) {
#if TRAINERD_TORCH_AT_LEAST(2, 0)
  if (visible.defined()) return at::scaled_dot_product_attention(q, k, v, visible, dropout);
  return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, dropout, /*is_causal=*/true);
#else
  (void)q, (void)k, (void)v, (void)dropout, (void)visible;
  TORCH_CHECK(false, "at::scaled_dot_product_attention needs LibTorch 2.0 or later");
#endif
}

// ---- Optimizers ------------------------------------------------------------------------------

// The key of `parameter`'s entry in an optimizer's state(): its TensorImpl's address, which
// LibTorch before 2.0 spells as a string.
#if TRAINERD_TORCH_AT_LEAST(2, 0)
inline void* OptimizerStateKey(const torch::Tensor& parameter) {
  return parameter.unsafeGetTensorImpl();
}
#else
inline std::string OptimizerStateKey(const torch::Tensor& parameter) {
  return c10::guts::to_string(parameter.unsafeGetTensorImpl());
}
#endif

// ---- Collectives ----------------------------------------------------------------------------

// What ProcessGroupGloo and ProcessGroupNCCL derive from and allreduce() is called on.
#if TRAINERD_TORCH_AT_LEAST(2, 0)
using CollectiveBackend = c10d::Backend;
#else
using CollectiveBackend = c10d::ProcessGroup;
#endif

// ---- CUDA ------------------------------------------------------------------------------------

#ifdef TRAINERD_WITH_CUDA
// The caching allocator's byte counters of one device, all devices' streams together.
// allocated: bytes in tensors; reserved: bytes the allocator holds from the driver
// (allocated plus its cache).
// refused: the allocations it failed with an out-of-memory since the process started.
struct CudaAllocatorBytes {
  std::int64_t allocated = 0;
  std::int64_t allocated_peak = 0;
  std::int64_t reserved = 0;
  std::int64_t reserved_peak = 0;
  std::int64_t refused = 0;
};

// Initialises CUDA and its caching allocator once. Until then LibTorch 2.x's allocator has no
// device (its statistics fail "Allocator not initialized for device", seen on an H200): a
// process that asks for them before its first CUDA tensor must call this first.
inline void InitCuda() {
#if TRAINERD_TORCH_AT_LEAST(2, 6)
  at::globalContext().lazyInitDevice(at::kCUDA);
#else
  at::globalContext().lazyInitCUDA();
#endif
}

// The statistics moved from c10::cuda::CUDACachingAllocator to c10::CachingDeviceAllocator
// (DeviceStats) and c10::CachingAllocator (Stat, StatType) in 2.5.
inline CudaAllocatorBytes CudaCachingAllocatorBytes(c10::DeviceIndex device) {
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device);
#if TRAINERD_TORCH_AT_LEAST(2, 5)
  constexpr auto kAggregate = static_cast<std::size_t>(c10::CachingAllocator::StatType::AGGREGATE);
#else
  constexpr auto kAggregate =
      static_cast<std::size_t>(c10::cuda::CUDACachingAllocator::StatType::AGGREGATE);
#endif
  const auto& allocated = stats.allocated_bytes[kAggregate];
  const auto& reserved = stats.reserved_bytes[kAggregate];
  return {allocated.current, allocated.peak, reserved.current, reserved.peak, stats.num_ooms};
}

inline void ResetCudaPeaks(c10::DeviceIndex device) {
  c10::cuda::CUDACachingAllocator::resetPeakStats(device);
}

// Caps what the caching allocator may reserve on `device` at `fraction` of its memory; an
// allocation beyond it (after the cache is emptied) throws c10::OutOfMemoryError.
inline void SetCudaMemoryFraction(double fraction, c10::DeviceIndex device) {
  c10::cuda::CUDACachingAllocator::setMemoryFraction(fraction, device);
}

inline void CheckCuda(cudaError_t status, const char* what) {
  TORCH_CHECK(status == cudaSuccess, what, ": ", cudaGetErrorString(status));
}

inline std::int64_t CudaTotalMemory(c10::DeviceIndex device) {
  cudaDeviceProp properties{};
  CheckCuda(cudaGetDeviceProperties(&properties, device), "cudaGetDeviceProperties");
  return static_cast<std::int64_t>(properties.totalGlobalMem);
}

// What a run record says about the GPU.
struct CudaDeviceDescription {
  std::string name;
  std::int64_t total_memory_bytes = 0;
  std::string compute_capability;  // "9.0"
  int driver_version = 0;          // cudaDriverGetVersion: 1000 * major + 10 * minor
  int runtime_version = 0;         // cudaRuntimeGetVersion, same encoding
};

inline CudaDeviceDescription DescribeCudaDevice(c10::DeviceIndex device) {
  cudaDeviceProp properties{};
  CheckCuda(cudaGetDeviceProperties(&properties, device), "cudaGetDeviceProperties");
  CudaDeviceDescription d;
  d.name = properties.name;
  d.total_memory_bytes = static_cast<std::int64_t>(properties.totalGlobalMem);
  d.compute_capability = std::to_string(properties.major) + "." + std::to_string(properties.minor);
  CheckCuda(cudaDriverGetVersion(&d.driver_version), "cudaDriverGetVersion");
  CheckCuda(cudaRuntimeGetVersion(&d.runtime_version), "cudaRuntimeGetVersion");
  return d;
}
#endif  // TRAINERD_WITH_CUDA

}  // namespace trainerd::compat
