#include "trainerd/daemon/host_fingerprint.h"

#include <fstream>
#include <thread>

#include "trainerd/common/cpu_isa.h"
#include "trainerd/common/proc_file.h"
#include "trainerd/trainer/spec/worker_protocol.h"
#include "trainerd_version.h"

namespace trainerd::daemon {

store::HardwareFingerprint HostHardware(const std::string& device) {
  store::HardwareFingerprint hw;
  hw.cpu_model = ProcFileValue("/proc/cpuinfo", "model name");
  if (hw.cpu_model.empty()) hw.cpu_model = "unknown";
  hw.cpu_cores = std::thread::hardware_concurrency();
  hw.memory_bytes = HostMemoryBytes();
  hw.isa = ThisCpuIsa().Description();
  hw.device = device;
  hw.device_memory_bytes = device == "cpu" ? hw.memory_bytes : 0;
  return hw;
}

bool ApplyDeviceDescription(const nlohmann::json& report, store::HardwareFingerprint* hw) {
  std::vector<std::string> mistyped;
  const DeviceInfoReport parsed = Parse<DeviceInfoReport>(report, &mistyped);
  const DeviceInfo& device = parsed.device_info;
  if (!mistyped.empty() || device.name.empty() || device.total_memory_bytes <= 0) return false;
  hw->device = device.name;
  hw->device_memory_bytes = device.total_memory_bytes;
  return true;
}

std::string TrainerdVersion() { return TRAINERD_VERSION; }

namespace {

// The value of the "oom_kill N" line of a memory controller file.
std::optional<std::int64_t> OomKillOf(const std::string& path) {
  std::ifstream file(path);
  std::string key;
  std::int64_t value = 0;
  while (file >> key >> value) {
    if (key == "oom_kill") return value;
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::int64_t> CgroupOomKillCount() {
  const std::string v2 = SelfCgroupDir();
  if (!v2.empty()) {
    if (std::optional<std::int64_t> kills = OomKillOf(v2 + "/memory.events")) return kills;
  }
  const std::string v1 = SelfMemoryCgroupV1Dir();
  if (v1.empty()) return std::nullopt;
  return OomKillOf(v1 + "/memory.oom_control");
}

}  // namespace trainerd::daemon
