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

// Each block carries its size and the counters it is in (the host's, the device's or both)
// in a header, so the deleter needs no lookup table. 64 bytes keep the data at LibTorch's
// 64-byte alignment.
constexpr std::size_t kHeader = 64;
struct BlockHeader {
  std::size_t bytes;
  bool host;
  bool device;
};
static_assert(sizeof(BlockHeader) <= kHeader);

thread_local bool in_host_scope = false;
std::atomic<bool> cpu_host_apart{true};  // SetCpuHostApart

// Live and peak bytes under a limit, shared by allocating threads.
class Counter {
 public:
  // Counts `bytes` more, or throws c10::OutOfMemoryError (counting nothing) when that would
  // pass the limit.
  void Add(std::int64_t bytes) {
    const std::int64_t live = live_.fetch_add(bytes) + bytes;
    const std::int64_t limit = limit_.load();
    if (limit > 0 && live > limit) {
      live_.fetch_sub(bytes);
      refused_.fetch_add(1);
      TORCH_CHECK_WITH(OutOfMemoryError, false, "trainerd CPU budget exceeded: tried to allocate ",
                       bytes, " bytes with ", live - bytes, " bytes live and a limit of ", limit,
                       " bytes");
    }
    std::int64_t peak = peak_.load();
    while (live > peak && !peak_.compare_exchange_weak(peak, live)) {
    }
  }
  void Remove(std::int64_t bytes) { live_.fetch_sub(bytes); }
  std::int64_t live() const { return live_.load(); }
  std::int64_t peak() const { return peak_.load(); }
  void ResetPeak() { peak_.store(live_.load()); }
  void SetLimit(std::int64_t bytes) { limit_.store(bytes); }
  std::int64_t limit() const { return limit_.load(); }
  std::int64_t refused() const { return refused_.load(); }

 private:
  std::atomic<std::int64_t> refused_{0};
  std::atomic<std::int64_t> live_{0};
  std::atomic<std::int64_t> peak_{0};
  std::atomic<std::int64_t> limit_{0};
};

class CountingHostMemory final : public HostMemory {
 public:
  explicit CountingHostMemory(Counter* counter) : counter_(counter) {}
  std::int64_t live_bytes() const override { return counter_->live(); }
  std::int64_t peak_bytes() const override { return counter_->peak(); }
  void ResetPeak() override { counter_->ResetPeak(); }

 private:
  Counter* counter_;
};

class CountingCpuAllocator final : public compat::CpuAllocatorBase, public DeviceMemory {
 public:
  c10::DataPtr Allocate(std::size_t n) const override {
    const bool host = in_host_scope;
    const bool device = !host || !cpu_host_apart.load();
    const auto bytes = static_cast<std::int64_t>(n);
    if (device) device_.Add(bytes);  // the device's limit may refuse it
    if (host) host_.Add(bytes);
    auto* base = static_cast<char*>(c10::alloc_cpu(n + kHeader));
    *reinterpret_cast<BlockHeader*>(base) = {n, host, device};
    void* data = base + kHeader;
    return {data, data, &Delete, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &Delete; }

  std::int64_t live_bytes() const override { return device_.live(); }
  std::int64_t peak_bytes() const override { return device_.peak(); }
  std::int64_t reserved_bytes() const override { return live_bytes(); }
  std::int64_t peak_reserved_bytes() const override { return peak_bytes(); }
  void ResetPeak() override { device_.ResetPeak(); }
  void SetLimit(std::int64_t bytes) override { device_.SetLimit(bytes); }
  std::int64_t limit() const override { return device_.limit(); }
  std::int64_t refused_allocations() const override { return Refused(); }
  // Without an allocator object: counted from its installation, 0 before.
  static std::int64_t Refused() { return device_.refused(); }
  std::string method() const override {
    return std::string("bytes of live CPU tensors counted by a wrapping c10 CPU allocator ") +
           (cpu_host_apart.load() ? "(host-memory scopes apart: a simulated device)"
                                  : "(host-memory scopes included: the host is the device)");
  }
  HostMemory& host() { return host_memory_; }

 private:
  static void Delete(void* data) {
    if (data == nullptr) return;
    char* base = static_cast<char*>(data) - kHeader;
    const BlockHeader header = *reinterpret_cast<BlockHeader*>(base);
    const auto bytes = static_cast<std::int64_t>(header.bytes);
    if (header.device) device_.Remove(bytes);
    if (header.host) host_.Remove(bytes);
    c10::free_cpu(base);
  }

  // Static: blocks freed after the allocator object is gone still find their counter.
  static inline Counter device_;
  static inline Counter host_;
  CountingHostMemory host_memory_{&host_};
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
  std::int64_t refused_allocations() const override { return Bytes().refused; }
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

#ifdef TRAINERD_WITH_CUDA
// The CUDA devices MemoryOf handed out, by index.
std::map<c10::DeviceIndex, std::unique_ptr<CudaMemory>>& CudaDevices(
    std::unique_lock<std::mutex>* lock) {
  static std::mutex mutex;
  static std::map<c10::DeviceIndex, std::unique_ptr<CudaMemory>> devices;
  *lock = std::unique_lock<std::mutex>(mutex);
  return devices;
}
#endif

CountingCpuAllocator& CountingAllocator() {
  static CountingCpuAllocator* allocator = [] {
    auto* a = new CountingCpuAllocator();  // never freed: tensors may outlive main()
    c10::SetCPUAllocator(a, /*priority=*/100);
    return a;
  }();
  return *allocator;
}

}  // namespace

DeviceMemory& MemoryOf(const torch::Device& device) {
#ifdef TRAINERD_WITH_CUDA
  if (device.is_cuda()) {
    const c10::DeviceIndex index = compat::CudaIndexOf(device);
    std::unique_lock<std::mutex> lock;
    auto& memory = CudaDevices(&lock)[index];
    if (!memory) memory = std::make_unique<CudaMemory>(index);
    return *memory;
  }
#endif
  TORCH_CHECK(device.is_cpu(), "no memory accounting for device ", device.str(), " in this build");
  return CountingAllocator();
}

namespace {

// Every allocator's refusals: the CPU's (the host's never refuse) and each CUDA device's.
// Installs nothing: the CPU's counts from its installation.
std::int64_t RefusedAllocations() {
  std::int64_t refused = CountingCpuAllocator::Refused();
#ifdef TRAINERD_WITH_CUDA
  std::unique_lock<std::mutex> lock;
  for (const auto& [index, memory] : CudaDevices(&lock)) refused += memory->refused_allocations();
#endif
  return refused;
}

}  // namespace

OutOfMemoryWatch::OutOfMemoryWatch() : refused_before_(RefusedAllocations()) {}

bool OutOfMemoryWatch::IsOutOfMemory(const std::exception& e) const {
  return dynamic_cast<const c10::OutOfMemoryError*>(&e) != nullptr ||
         RefusedAllocations() > refused_before_;
}

void SetCpuHostApart(bool apart) { cpu_host_apart.store(apart); }

HostMemory& HostMemoryOfProcess() { return CountingAllocator().host(); }

HostMemoryScope::HostMemoryScope() : saved_(in_host_scope) {
  CountingAllocator();  // beside a GPU nothing else may have installed it yet
  in_host_scope = true;
}
HostMemoryScope::~HostMemoryScope() { in_host_scope = saved_; }

}  // namespace trainerd
