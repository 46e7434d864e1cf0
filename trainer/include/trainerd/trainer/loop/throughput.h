// Throughput accounting: model FLOPs of an update and MFU against the machine's measured
// peak (device/machine.h). An achieved rate above the measured peak is an invalid
// measurement, not a speedup: it is flagged, never reported as MFU.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "trainerd/trainer/spec/job_spec.h"

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
