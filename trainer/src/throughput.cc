#include "trainerd/trainer/throughput.h"

#include <torch/torch.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "trainerd/common/atomic_file.h"
#include "trainerd/common/proc_file.h"

namespace trainerd {
namespace {

// A /proc value, "unknown" where the file or the key is missing.
std::string ProcValueOrUnknown(const std::string& path, const std::string& key) {
  const std::string value = ProcFileValue(path, key);
  return value.empty() ? "unknown" : value;
}

double MeasureMatmulFlops(Precision precision) {
  constexpr std::int64_t n = 1024;
  const auto dtype = precision == Precision::kBf16   ? torch::kBFloat16
                     : precision == Precision::kFp16 ? torch::kFloat  // no fast fp16 on CPU
                                                     : torch::kFloat;
  torch::NoGradGuard no_grad;
  const torch::Tensor a = torch::randn({n, n}).to(dtype);
  const torch::Tensor b = torch::randn({n, n}).to(dtype);
  double best = 1e30;
  for (int i = 0; i < 8; ++i) {
    const auto start = std::chrono::steady_clock::now();
    torch::Tensor c = torch::matmul(a, b);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (i > 1) best = std::min(best, seconds);  // the first two warm up kernels and caches
  }
  return 2.0 * n * n * n / best;
}

}  // namespace

double ModelFlopsPerSample(const ModelSpec& model, std::int64_t parameters) {
  if (model.kind == ModelKind::kMlpClassifier) return 6.0 * static_cast<double>(parameters);
  const GptOptions& g = model.gpt;
  const double per_token = 6.0 * static_cast<double>(parameters) +
                           12.0 * g.n_layer * g.block_size * static_cast<double>(g.n_embd);
  return per_token * g.block_size;
}

std::string HardwareFingerprint() {
  return ProcValueOrUnknown("/proc/cpuinfo", "model name") + " | " +
         std::to_string(std::thread::hardware_concurrency()) + " cores | " +
         ProcValueOrUnknown("/proc/meminfo", "MemTotal");
}

nlohmann::json SoftwareFingerprint() {
  std::string blas = "unknown";
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    const auto slash = line.find('/');
    if (slash == std::string::npos) continue;
    const std::string file = line.substr(slash);
    const std::string name = std::filesystem::path(file).filename().string();
    if (name.find("blas") != std::string::npos) {
      blas = file;
      break;
    }
  }
  return {{"torch_version", TORCH_VERSION}, {"blas", blas}, {"compiler", "GCC " __VERSION__}};
}

std::string DefaultPeakFlopsCache() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  const std::string base = xdg != nullptr    ? xdg
                           : home != nullptr ? std::string(home) + "/.cache"
                                             : "/tmp";
  return base + "/trainerd/peak_flops.json";
}

double PeakFlops(Precision precision, const std::string& cache_file) {
  const std::string key = HardwareFingerprint() + " | " + ToString(precision) + " | " +
                          std::to_string(torch::get_num_threads()) + " threads | torch " +
                          TORCH_VERSION;
  nlohmann::json cache = nlohmann::json::object();
  if (!cache_file.empty()) {
    std::ifstream in(cache_file);
    if (in) cache = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (!cache.is_object()) cache = nlohmann::json::object();  // a corrupt cache is re-measured
    if (cache.contains(key) && cache[key].is_number()) return cache[key].get<double>();
  }
  const double flops = MeasureMatmulFlops(precision);
  if (!cache_file.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(cache_file).parent_path(), ec);
    cache[key] = flops;
    (void)WriteFileAtomically(cache_file, cache.dump(2));  // a cache: failure only costs a re-probe
  }
  return flops;
}

ThroughputAssessment AssessThroughput(double achieved_flops, double peak_flops) {
  ThroughputAssessment a;
  a.achieved_flops = achieved_flops;
  a.peak_flops = peak_flops;
  if (!(peak_flops > 0) || !(achieved_flops >= 0)) {
    a.valid = false;
    a.note = "no valid peak or achieved rate";
  } else if (achieved_flops > peak_flops) {
    a.valid = false;
    a.note =
        "achieved FLOP/s above the measured machine peak: the timing is wrong (unsynchronized "
        "device, warm-up counted, or wrong FLOP count), not a speedup";
  } else {
    a.mfu = achieved_flops / peak_flops;
  }
  return a;
}

}  // namespace trainerd
