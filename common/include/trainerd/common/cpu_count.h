// How many CPUs this process can actually use, for "threads: auto": a machine's core count
// overstates it under taskset/cpusets (the affinity mask) and under systemd's CPUQuota= or a
// container's CPU limit (cgroup v2 cpu.max).
#pragma once

#include <optional>
#include <string>

namespace trainerd {

// The CPUs of this process's affinity mask, capped by the cgroup v2 CPU quota of its cgroup
// and every cgroup above it (rounded up to whole CPUs); at least 1.
int UsableCpuCount();

// CPUs a cgroup v2 cpu.max line allows ("150000 100000" -> 2, rounded up); nullopt for
// "max ..." (no quota) or a line that does not parse.
std::optional<int> CpusOfCgroupMax(const std::string& cpu_max);

}  // namespace trainerd
