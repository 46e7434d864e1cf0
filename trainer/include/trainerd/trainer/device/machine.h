// What this machine is and can do, for the run record and MFU: the hardware and software
// fingerprints, the training device's description, and the peak FLOP/s of matrix products
// measured on it (a probe, cached per hardware fingerprint).
#pragma once

#include <torch/types.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "trainerd/common/isa_peak.h"
#include "trainerd/trainer/spec/job_spec.h"
#include "trainerd/trainer/spec/worker_protocol.h"

namespace trainerd {

// "CPU model | cores | memory" of this machine, from /proc.
std::string HardwareFingerprint();

// The training device for the run record: {"type": "cpu" | "cuda", "name",
// "total_memory_bytes"}, and on CUDA also "compute_capability" ("9.0"), "driver_version" and
// "runtime_version" ("13.0"). CPU: the CPU model, the machine's memory, the CPU's
// instruction sets and the BLAS with the kernels it chose (device/blas_kernel.h).
DeviceInfo DeviceDescription(const torch::Device& device);

// The software a measurement depends on: {"torch_version", "blas" (the BLAS by its own name
// with the kernels it chose, and the library file mapped into this process: "OpenBLAS
// 0.3.21, Haswell kernels, .../openblas-openmp/libblas.so.3"), "compiler"}.
SoftwareInfo SoftwareFingerprint();

// Best FLOP/s of square matrix products in `precision` on `device` (the training device, so
// MFU compares like with like) on the current thread setting, timed between device
// synchronisations, and cached in `cache_file`: JSON keyed by machine, device name (on the
// CPU with the BLAS's kernels, which the worker may have changed), precision, threads and
// LibTorch version, each entry {"flops", "probes", "measured_at" (Unix
// seconds of the last probe), "method"}. Noise (a build on the other core, a frequency dip)
// can only slow a probe down, so the best is kept: a first measurement takes the best of
// kPeakProbes probes, and when `achieved` (a rate a run reached on this device; 0: none) is
// within 10 % of the cached peak or above it, the peak is probed again and the best of all
// is kept. An entry of another form is measured anew. An empty cache_file disables caching.
inline constexpr int kPeakProbes = 3;
// One probe, uncached: square matrix products in the precision's compute type on `device`
// (1024^3 on a CPU), the fastest of 6 after 2 that warm up, timed between synchronisations.
double MeasureMatmulFlops(Precision precision, const torch::Device& device);
double PeakFlops(Precision precision, const torch::Device& device, const std::string& cache_file,
                 double achieved = 0);

// Default cache: $XDG_CACHE_HOME/trainerd/peak_flops.json or ~/.cache/trainerd/...
std::string DefaultPeakFlopsCache();

// The instruction set's roof for this process's threads (common/isa_peak.h), for an fp32 job
// on the CPU, whose products the BLAS computes; nothing for another precision or device, or
// where the CPU's clock or instruction set is unknown.
std::optional<IsaPeak> IsaRoof(Precision precision, const torch::Device& device);

// Why a measured peak is far below `roof` (PeakBelowTheIsa), with the BLAS's kernels as the
// reason when they run below the CPU.
std::optional<std::string> PeakBelowTheIsaRoof(double measured, const IsaPeak& roof);

}  // namespace trainerd
