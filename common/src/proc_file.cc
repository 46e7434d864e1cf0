#include "trainerd/common/proc_file.h"

#include <fstream>
#include <sstream>

namespace trainerd {

std::string ProcFileValue(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(" \t"));
    return value;
  }
  return "";
}

namespace {

// A /proc/meminfo figure in bytes ("24574412 kB"); 0 where it cannot be read.
std::int64_t MeminfoBytes(const std::string& key) {
  std::istringstream kib(ProcFileValue("/proc/meminfo", key));
  std::int64_t kilobytes = 0;
  kib >> kilobytes;
  return kilobytes * 1024;
}

}  // namespace

std::int64_t HostMemoryBytes() { return MeminfoBytes("MemTotal"); }

std::int64_t HostAvailableBytes() { return MeminfoBytes("MemAvailable"); }

std::string SelfCgroupDir() {
  std::ifstream cgroup("/proc/self/cgroup");
  std::string line, path;
  while (std::getline(cgroup, line)) {
    if (line.rfind("0::", 0) == 0) path = line.substr(3);  // the cgroup v2 hierarchy
  }
  return path.empty() ? "" : "/sys/fs/cgroup" + path;
}

std::string MemoryCgroupV1Dir(const std::string& proc_cgroup_text) {
  std::istringstream lines(proc_cgroup_text);
  for (std::string line; std::getline(lines, line);) {  // "4:memory:/path", "5:cpu,memory:/path"
    const auto first = line.find(':');
    const auto second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second == std::string::npos) continue;
    std::istringstream controllers(line.substr(first + 1, second - first - 1));
    for (std::string controller; std::getline(controllers, controller, ',');) {
      if (controller == "memory") return "/sys/fs/cgroup/memory" + line.substr(second + 1);
    }
  }
  return "";
}

std::string SelfMemoryCgroupV1Dir() {
  std::ifstream cgroup("/proc/self/cgroup");
  std::ostringstream text;
  text << cgroup.rdbuf();
  return MemoryCgroupV1Dir(text.str());
}

}  // namespace trainerd
