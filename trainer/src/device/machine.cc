#include "trainerd/trainer/device/machine.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "trainerd/common/atomic_file.h"
#include "trainerd/common/cache_dir.h"
#include "trainerd/common/cpu_isa.h"
#include "trainerd/common/proc_file.h"
#include "trainerd/trainer/device/blas_core_fix.h"
#include "trainerd/trainer/device/blas_kernel.h"
#include "trainerd/trainer/device/device_timer.h"
#include "trainerd/trainer/device/torch_compat.h"

namespace trainerd {
namespace {

// "13.0" from CUDA's 1000 * major + 10 * minor encoding.
[[maybe_unused]] std::string CudaVersionString(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

// A /proc value, "unknown" where the file or the key is missing.
std::string ProcValueOrUnknown(const std::string& path, const std::string& key) {
  const std::string value = ProcFileValue(path, key);
  return value.empty() ? "unknown" : value;
}

// A cached peak a run's achieved rate comes this close to is probed again.
constexpr double kNearPeak = 0.9;
// Timed products per probe, after the first two that warm up kernels and caches.
constexpr int kTimedProducts = 6;

// A GPU needs larger products to reach its peak than a CPU core does.
std::int64_t ProbeSize(const torch::Device& device) { return device.is_cuda() ? 8192 : 1024; }

// The compute type of `precision`'s products on `device`.
torch::ScalarType ProbeType(Precision precision, const torch::Device& device) {
  if (precision == Precision::kBf16) return torch::kBFloat16;
  if (precision == Precision::kFp16 && device.is_cuda()) return torch::kHalf;
  return torch::kFloat;  // fp32, and fp16 on the CPU (no CPU fp16 path)
}

std::string MatmulProbeMethod(Precision precision, const torch::Device& device) {
  const std::string n = std::to_string(ProbeSize(device));
  const torch::ScalarType type = ProbeType(precision, device);
  const char* word = type == torch::kBFloat16 ? "bf16" : type == torch::kHalf ? "fp16" : "fp32";
  return "the fastest of " + std::to_string(kTimedProducts) + " timed " + n + " x " + n + " x " +
         n + " " + word + " matrix products on " + device.str();
}

double UnixSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

double MeasureMatmulFlops(Precision precision, const torch::Device& device) {
  const std::int64_t n = ProbeSize(device);
  torch::NoGradGuard no_grad;
  const auto options = torch::TensorOptions().dtype(ProbeType(precision, device)).device(device);
  const torch::Tensor a = torch::randn({n, n}, options);
  const torch::Tensor b = torch::randn({n, n}, options);
  double best = 1e30;
  for (int i = 0; i < kTimedProducts + 2; ++i) {
    DeviceTimer timer(device);
    torch::Tensor c = torch::matmul(a, b);
    const double seconds = timer.Seconds();
    if (i > 1) best = std::min(best, seconds);  // the first two warm up kernels and caches
  }
  return 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n) / best;
}

DeviceInfo DeviceDescription(const torch::Device& device) {
#ifdef TRAINERD_WITH_CUDA
  if (device.is_cuda()) {
    const compat::CudaDeviceDescription d = compat::DescribeCudaDevice(compat::CudaIndexOf(device));
    DeviceInfo gpu;
    gpu.type = "cuda";
    gpu.name = d.name;
    gpu.total_memory_bytes = d.total_memory_bytes;
    gpu.compute_capability = d.compute_capability;
    gpu.driver_version = CudaVersionString(d.driver_version);
    gpu.runtime_version = CudaVersionString(d.runtime_version);
    return gpu;
  }
#endif
  TORCH_CHECK(device.is_cpu(), "no description for device ", device.str(), " in this build");
  DeviceInfo cpu;
  cpu.type = "cpu";
  cpu.name = ProcValueOrUnknown("/proc/cpuinfo", "model name");
  cpu.total_memory_bytes = HostMemoryBytes();
  const CpuIsa isa = ThisCpuIsa();
  const BlasKernel blas = DescribeThisBlas();
  cpu.isa = isa.Description();
  cpu.blas = blas.library;
  cpu.blas_core = blas.core;
  cpu.blas_below_cpu = BlasBelowTheCpu(blas, isa);
  cpu.blas_core_fix = BlasCoreFixRecord();
  return cpu;
}

std::string HardwareFingerprint() {
  return ProcValueOrUnknown("/proc/cpuinfo", "model name") + " | " +
         std::to_string(std::thread::hardware_concurrency()) + " cores | " +
         ProcValueOrUnknown("/proc/meminfo", "MemTotal");
}

SoftwareInfo SoftwareFingerprint() {
  std::string file;
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    const auto slash = line.find('/');
    if (slash == std::string::npos) continue;
    const std::string mapped = line.substr(slash);
    const std::string name = std::filesystem::path(mapped).filename().string();
    if (name.find("blas") != std::string::npos) {
      file = mapped;
      break;
    }
  }
  const BlasKernel kernel = DescribeThisBlas();
  std::string blas = kernel.library;
  if (kernel.core != "unknown") blas += ", " + kernel.core + " kernels";
  if (!file.empty()) blas += ", " + file;
  return {TORCH_VERSION, blas, "GCC " __VERSION__};
}

std::string DefaultPeakFlopsCache() { return UserCacheDir() + "/peak_flops.json"; }

double PeakFlops(Precision precision, const torch::Device& device, const std::string& cache_file,
                 double achieved) {
  const std::string device_name = device.is_cpu() ? "cpu, " + DescribeThisBlas().core + " kernels"
                                                  : DeviceDescription(device).name;
  const std::string key = HardwareFingerprint() + " | " + device_name + " | " +
                          ToString(precision) + " | " + std::to_string(torch::get_num_threads()) +
                          " threads | torch " + TORCH_VERSION;
  nlohmann::json cache = nlohmann::json::object();
  if (!cache_file.empty()) {
    std::ifstream in(cache_file);
    if (in) cache = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (!cache.is_object()) cache = nlohmann::json::object();  // a corrupt cache is re-measured
  }
  const nlohmann::json entry = cache.value(key, nlohmann::json());
  const bool cached = entry.is_object() && entry.value("flops", 0.0) > 0;
  double best = cached ? entry.value("flops", 0.0) : 0;
  if (cached && achieved < kNearPeak * best) return best;
  const int probes = (cached ? entry.value("probes", 0) : 0) + kPeakProbes;
  for (int i = 0; i < kPeakProbes; ++i)
    best = std::max(best, MeasureMatmulFlops(precision, device));
  if (!cache_file.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(cache_file).parent_path(), ec);
    cache[key] = {{"flops", best},
                  {"probes", probes},
                  {"measured_at", UnixSeconds()},
                  {"method", "the best of " + std::to_string(probes) + " probes, each " +
                                 MatmulProbeMethod(precision, device)}};
    (void)WriteFileAtomically(cache_file, cache.dump(2));  // a cache: failure only costs a re-probe
  }
  return best;
}

std::optional<IsaPeak> IsaRoof(Precision precision, const torch::Device& device) {
  if (!device.is_cpu() || precision != Precision::kFp32) return std::nullopt;
  const IsaPeak roof = Fp32IsaPeak(ThisCpuIsa(), torch::get_num_threads(), ThisCpuClockHz());
  if (!(roof.flops_per_second > 0)) return std::nullopt;
  return roof;
}

std::optional<std::string> PeakBelowTheIsaRoof(double measured, const IsaPeak& roof) {
  return PeakBelowTheIsa(measured, roof, BlasBelowTheCpu(DescribeThisBlas(), ThisCpuIsa()));
}

}  // namespace trainerd
