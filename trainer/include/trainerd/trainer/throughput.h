// Throughput accounting: model FLOPs of an update, the machine's measured peak (a
// matrix-product probe, cached per hardware fingerprint), and MFU. An achieved rate above
// the measured peak is an invalid measurement, not a speedup: it is flagged, never reported
// as MFU.
#pragma once

#include <torch/types.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "trainerd/trainer/job_spec.h"

namespace trainerd {

// Training FLOPs (forward + backward) per sample: 6 per parameter per token, plus attention
// 12 * n_layer * block_size * n_embd per token for the GPT (nanoGPT's estimate).
// Recomputation of checkpointed blocks is not useful work and is not counted. A TorchScript
// model's is model.flops_per_sample when the job gives it, else 3 x the matrix products of
// one forward counted when the worker loaded it (matmul_flops.h), else none with the reason
// (MFU is then null, never a guess).
struct FlopsPerSample {
  std::optional<double> value;
  std::string method;  // how `value` was obtained, or why there is none
};
FlopsPerSample ModelFlopsPerSample(const ModelSpec& model, std::int64_t parameters);

// "CPU model | cores | memory" of this machine, from /proc.
std::string HardwareFingerprint();

// The training device for the run record: {"type": "cpu" | "cuda", "name",
// "total_memory_bytes"}, and on CUDA also "compute_capability" ("9.0"), "driver_version" and
// "runtime_version" ("13.0"). CPU: the CPU model and the machine's memory.
nlohmann::json DeviceDescription(const torch::Device& device);

// The software a measurement depends on: {"torch_version", "blas" (the BLAS library file
// mapped into this process, e.g. .../openblas-openmp/libblas.so.3), "compiler"}.
nlohmann::json SoftwareFingerprint();

// Best FLOP/s of square matrix products in `precision` on `device` (the training device, so
// MFU compares like with like) on the current thread setting, timed between device
// synchronisations, measured once and cached in `cache_file` (JSON keyed by machine, device
// name, precision, threads and LibTorch version). An empty cache_file disables caching.
double PeakFlops(Precision precision, const torch::Device& device, const std::string& cache_file);

// Default cache: $XDG_CACHE_HOME/trainerd/peak_flops.json or ~/.cache/trainerd/...
std::string DefaultPeakFlopsCache();

struct ThroughputAssessment {
  double achieved_flops = 0;  // FLOP/s
  double peak_flops = 0;
  double mfu = 0;  // achieved / peak, when valid
  bool valid = true;
  std::string note;  // why invalid
};
// `achieved_flops` is none when the model's FLOPs per sample are unknown (a TorchScript
// model without model.flops_per_sample): invalid, and the note says so.
ThroughputAssessment AssessThroughput(
    std::optional<double> achieved_flops, double peak_flops,
    const std::string& unknown_note = "FLOPs per sample unknown for this model");

}  // namespace trainerd
