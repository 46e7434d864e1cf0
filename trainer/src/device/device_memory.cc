#include "trainerd/trainer/device/device_memory.h"

#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>

#include "trainerd/trainer/device/torch_compat.h"

namespace trainerd {
namespace {

// Each block carries its size in a header, so the deleter needs no lookup table. 64 bytes
// keep the data at LibTorch's 64-byte alignment.
constexpr std::size_t kHeader = 64;

class CountingCpuAllocator final : public compat::CpuAllocatorBase, public DeviceMemory {
 public:
  c10::DataPtr Allocate(std::size_t n) const override {
    const auto bytes = static_cast<std::int64_t>(n);
    const std::int64_t live = live_.fetch_add(bytes) + bytes;
    const std::int64_t limit = limit_.load();
    if (limit > 0 && live > limit) {
      live_.fetch_sub(bytes);
      TORCH_CHECK_WITH(OutOfMemoryError, false, "trainerd CPU budget exceeded: tried to allocate ",
                       n, " bytes with ", live - bytes, " bytes live and a limit of ", limit,
                       " bytes");
    }
    std::int64_t peak = peak_.load();
    while (live > peak && !peak_.compare_exchange_weak(peak, live)) {
    }
    auto* base = static_cast<char*>(c10::alloc_cpu(n + kHeader));
    *reinterpret_cast<std::size_t*>(base) = n;
    void* data = base + kHeader;
    return {data, data, &Delete, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &Delete; }

  std::int64_t live_bytes() const override { return live_.load(); }
  std::int64_t peak_bytes() const override { return peak_.load(); }
  std::int64_t reserved_bytes() const override { return live_bytes(); }
  std::int64_t peak_reserved_bytes() const override { return peak_bytes(); }
  void ResetPeak() override { peak_.store(live_.load()); }
  void SetLimit(std::int64_t bytes) override { limit_.store(bytes); }
  std::int64_t limit() const override { return limit_.load(); }
  std::string method() const override {
    return "bytes of live CPU tensors counted by a wrapping c10 CPU allocator";
  }

 private:
  static void Delete(void* data) {
    if (data == nullptr) return;
    char* base = static_cast<char*>(data) - kHeader;
    live_.fetch_sub(static_cast<std::int64_t>(*reinterpret_cast<std::size_t*>(base)));
    c10::free_cpu(base);
  }

  static inline std::atomic<std::int64_t> live_{0};
  mutable std::atomic<std::int64_t> peak_{0};
  std::atomic<std::int64_t> limit_{0};
};

#ifdef TRAINERD_WITH_CUDA
class CudaMemory final : public DeviceMemory {
 public:
  explicit CudaMemory(c10::DeviceIndex index) : index_(index) { compat::InitCuda(); }
  std::int64_t live_bytes() const override { return Bytes().allocated; }
  std::int64_t peak_bytes() const override { return Bytes().allocated_peak; }
  std::int64_t reserved_bytes() const override { return Bytes().reserved; }
  std::int64_t peak_reserved_bytes() const override { return Bytes().reserved_peak; }
  void ResetPeak() override { compat::ResetCudaPeaks(index_); }
  void SetLimit(std::int64_t bytes) override {
    const auto total = static_cast<double>(compat::CudaTotalMemory(index_));
    limit_ = bytes;
    compat::SetCudaMemoryFraction(
        bytes > 0 ? std::min(1.0, static_cast<double>(bytes) / total) : 1.0, index_);
  }
  std::int64_t limit() const override { return limit_; }
  std::string method() const override {
    return "CUDA caching allocator allocated_bytes (all streams); reserved_bytes beside it; "
           "limit as the allocator's memory fraction of the device";
  }

 private:
  compat::CudaAllocatorBytes Bytes() const { return compat::CudaCachingAllocatorBytes(index_); }
  c10::DeviceIndex index_;
  std::int64_t limit_ = 0;
};
#endif

}  // namespace

DeviceMemory& MemoryOf(const torch::Device& device) {
#ifdef TRAINERD_WITH_CUDA
  if (device.is_cuda()) {
    static std::mutex mutex;
    static std::map<c10::DeviceIndex, std::unique_ptr<CudaMemory>> devices;
    const c10::DeviceIndex index = compat::CudaIndexOf(device);
    std::lock_guard<std::mutex> lock(mutex);
    auto& memory = devices[index];
    if (!memory) memory = std::make_unique<CudaMemory>(index);
    return *memory;
  }
#endif
  TORCH_CHECK(device.is_cpu(), "no memory accounting for device ", device.str(), " in this build");
  static CountingCpuAllocator* allocator = [] {
    auto* a = new CountingCpuAllocator();  // never freed: tensors may outlive main()
    c10::SetCPUAllocator(a, /*priority=*/100);
    return a;
  }();
  return *allocator;
}

}  // namespace trainerd
