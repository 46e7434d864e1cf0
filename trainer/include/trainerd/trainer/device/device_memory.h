// Device memory as a measured, budgeted quantity, behind one interface for the CPU and CUDA.
//
// CPU: a counting allocator installed with c10::SetCPUAllocator wraps LibTorch's own; it
//   keeps live and peak bytes of every CPU tensor allocated after installation and throws
//   c10::OutOfMemoryError when an allocation would take live bytes above the limit, so an
//   OOM on a "24 GB device" is real and reproducible on a CPU machine.
// CUDA (built only where LibTorch has CUDA): the caching allocator's allocated bytes (live,
//   peak) and reserved bytes (what it holds from the driver: allocated plus its cache); the
//   limit is its per-process memory fraction, which caps reserved bytes, and an allocation
//   beyond it throws c10::OutOfMemoryError as on the CPU.
// Thread safety: counters are atomic; allocation happens on LibTorch's worker threads.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <exception>
#include <string>

#include "trainerd/common/status.h"

namespace trainerd {

class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  virtual std::int64_t live_bytes() const = 0;
  // Highest live_bytes() since the last ResetPeak().
  virtual std::int64_t peak_bytes() const = 0;
  // Bytes the device holds for this process: live bytes plus an allocator's cache. Equal to
  // live_bytes() on the CPU, which caches nothing.
  virtual std::int64_t reserved_bytes() const = 0;
  // Highest reserved_bytes() since the last ResetPeak().
  virtual std::int64_t peak_reserved_bytes() const = 0;
  // Starts a measurement: both peaks become the current values.
  virtual void ResetPeak() = 0;
  // Allocations that would take live bytes above `bytes` fail with c10::OutOfMemoryError;
  // 0 removes the limit.
  virtual void SetLimit(std::int64_t bytes) = 0;
  virtual std::int64_t limit() const = 0;
  // Allocations failed with an out-of-memory since the process started.
  virtual std::int64_t refused_allocations() const = 0;
  // How bytes are counted, for the run record.
  virtual std::string method() const = 0;
};

// Sets a limit for a scope and restores the previous one on exit (0 lifts it).
class ScopedMemoryLimit {
 public:
  ScopedMemoryLimit(DeviceMemory& memory, std::int64_t limit)
      : memory_(memory), saved_(memory.limit()) {
    memory_.SetLimit(limit);
  }
  ~ScopedMemoryLimit() { memory_.SetLimit(saved_); }
  ScopedMemoryLimit(const ScopedMemoryLimit&) = delete;
  ScopedMemoryLimit& operator=(const ScopedMemoryLimit&) = delete;

 private:
  DeviceMemory& memory_;
  std::int64_t saved_;
};

// Tells an out-of-memory apart from other errors by the allocators, not by the exception's
// type: the TorchScript interpreter rethrows an error inside a scripted model (a
// c10::OutOfMemoryError included) as a std::runtime_error naming the failed operation, and
// LibTorch's own kernels throw c10::OutOfMemoryError. An error is an out-of-memory when it is
// a c10::OutOfMemoryError, or when an allocator (the CPU's or a CUDA device's that MemoryOf
// handed out) refused an allocation since the watch began.
class OutOfMemoryWatch {
 public:
  OutOfMemoryWatch();
  bool IsOutOfMemory(const std::exception& e) const;
  // A measurement's failure by `e`: OutOfMemory(message) when it is one, else Internal.
  Status StatusOf(const std::exception& e, const std::string& message) const {
    return IsOutOfMemory(e) ? Status::OutOfMemory(message) : Status::Internal(message);
  }

 private:
  std::int64_t refused_before_;
};

// The memory of `device`. For the CPU the first call installs the counting allocator for the
// whole process (tensors allocated before are not counted: the Trainer calls it before it
// builds its model). Lives until the process exits.
DeviceMemory& MemoryOf(const torch::Device& device);

// Host memory a plan fills with model state (StatePlacement::kHost): CPU tensors allocated on
// a thread inside a HostMemoryScope are host bytes. Beside a GPU every CPU tensor is host
// memory, and the scope decides what the host ledger counts. On a CPU the device and the host
// are one RAM: the host bytes are also the CPU device's (its live bytes, peak and limit), so
// a plan's host state counts against the budget, unless SetCpuHostApart(true) says the CPU
// simulates an accelerator (memory.simulated_device), whose budget they are then outside.
// The counting CPU allocator is installed on first use, as by MemoryOf. The host budget is
// checked before training (HostBudgetBytes), not at each allocation.
class HostMemory {
 public:
  virtual ~HostMemory() = default;
  virtual std::int64_t live_bytes() const = 0;
  virtual std::int64_t peak_bytes() const = 0;
  virtual void ResetPeak() = 0;
};
HostMemory& HostMemoryOfProcess();

// Whether the CPU device's count leaves out host memory (true: the CPU simulates an
// accelerator; false: the host is the device, HostIsTheDevice). Process-wide, true until set:
// the Trainer sets it from its job.
void SetCpuHostApart(bool apart);

// Marks this thread's CPU allocations as host memory for its lifetime (scopes nest).
class HostMemoryScope {
 public:
  HostMemoryScope();
  ~HostMemoryScope();
  HostMemoryScope(const HostMemoryScope&) = delete;
  HostMemoryScope& operator=(const HostMemoryScope&) = delete;

 private:
  bool saved_;
};

}  // namespace trainerd
