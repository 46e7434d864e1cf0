// Reading "key: value" files such as /proc/cpuinfo and /proc/meminfo.
#pragma once

#include <cstdint>
#include <string>

namespace trainerd {

// The value after the colon of the first line of `path` that starts with `key`, leading
// blanks removed; "" when the file or the key is missing.
std::string ProcFileValue(const std::string& path, const std::string& key);

// The machine's memory (MemTotal of /proc/meminfo) in bytes; 0 where it cannot be read.
std::int64_t HostMemoryBytes();

// Memory the machine can give without swapping now (MemAvailable of /proc/meminfo) in
// bytes; 0 where it cannot be read.
std::int64_t HostAvailableBytes();

// This process's cgroup v2 folder ("/sys/fs/cgroup" + the "0::" path of /proc/self/cgroup);
// "" where the process is in no cgroup v2 hierarchy.
std::string SelfCgroupDir();

// The cgroup v1 memory controller's folder named by a /proc/<pid>/cgroup text (the line whose
// controllers include "memory": "/sys/fs/cgroup/memory" + its path); "" when no line does.
std::string MemoryCgroupV1Dir(const std::string& proc_cgroup_text);

// This process's cgroup v1 memory controller folder (MemoryCgroupV1Dir of /proc/self/cgroup).
std::string SelfMemoryCgroupV1Dir();

}  // namespace trainerd
