#include "trainerd/common/cpu_count.h"

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "trainerd/common/proc_file.h"

namespace trainerd {
namespace {

// The tightest quota on the path from this process's cgroup up to the root.
std::optional<int> CgroupQuotaCpus() {
  const std::string own = SelfCgroupDir();
  if (own.empty()) return std::nullopt;
  std::optional<int> tightest;
  for (std::filesystem::path dir = own;; dir = dir.parent_path()) {
    std::ifstream in(dir / "cpu.max");
    std::string cpu_max;
    if (in && std::getline(in, cpu_max)) {
      if (const std::optional<int> cpus = CpusOfCgroupMax(cpu_max)) {
        tightest = tightest ? std::min(*tightest, *cpus) : *cpus;
      }
    }
    if (dir == "/sys/fs/cgroup" || dir == dir.parent_path()) break;
  }
  return tightest;
}

}  // namespace

std::optional<int> CpusOfCgroupMax(const std::string& cpu_max) {
  std::istringstream in(cpu_max);
  std::string quota;
  double period = 0;
  if (!(in >> quota >> period) || quota == "max" || period <= 0) return std::nullopt;
  char* end = nullptr;
  const double microseconds = std::strtod(quota.c_str(), &end);
  if (end == quota.c_str() || *end != '\0' || microseconds <= 0) return std::nullopt;
  return std::max(1, static_cast<int>(std::ceil(microseconds / period)));
}

int UsableCpuCount() {
  int cpus = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof mask, &mask) == 0) cpus = std::max(1, CPU_COUNT(&mask));
  if (const std::optional<int> quota = CgroupQuotaCpus()) cpus = std::min(cpus, *quota);
  return cpus;
}

}  // namespace trainerd
