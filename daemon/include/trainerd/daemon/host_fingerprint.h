// What the daemon records about the machine and itself: the hardware fingerprint that keys
// validated plans and throughput baselines, trainerd's version, and the cgroup's count of
// kernel OOM kills (to tell a worker SIGKILLed by the OOM killer from other SIGKILLs).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "trainerd/store/records.h"

namespace trainerd::daemon {

// CPU model and logical cores from /proc/cpuinfo, host memory from /proc/meminfo; `device`
// is the job's runtime.device. On "cpu" the device memory is the host memory; on "cuda" it
// is not known to the daemon and stays 0 until ApplyDeviceDescription() fills it.
store::HardwareFingerprint HostHardware(const std::string& device);

// Fills the device half of `hw` from the worker's `trainer-run --device-info` report
// ({"device_info": {"name", "total_memory_bytes", ...}}): the daemon has no torch, so a GPU's
// name and memory come from the worker. Returns false, leaving `hw` unchanged, when the
// report lacks either.
bool ApplyDeviceDescription(const nlohmann::json& report, store::HardwareFingerprint* hw);

// "0.1.0+g1a2b3c4" (git describe at configure time; "0.1.0" outside a git checkout).
std::string TrainerdVersion();

// The `oom_kill` count of this process's cgroup: cgroup v2 memory.events, else the cgroup v1
// memory controller's memory.oom_control (kernel 4.13 and later); empty where neither can be
// read.
std::optional<std::int64_t> CgroupOomKillCount();

}  // namespace trainerd::daemon
