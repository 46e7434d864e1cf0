// Throughput accounting: model FLOPs of an update and MFU against the machine's measured
// peak (device/machine.h). An achieved rate above the measured peak is an invalid
// measurement, not a speedup: it is flagged, never reported as MFU.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "trainerd/trainer/models/model.h"
#include "trainerd/trainer/spec/job_spec.h"

namespace trainerd {

// Training FLOPs (forward + backward) per sample of `model`, built from `spec`: the job's
// model.flops_per_sample when it gives one, else the model's own formula (TrainingFlops: the
// GPT's 6 per parameter per token plus attention, nanoGPT's estimate), else 3 x the matrix
// products of one forward that ResolveModel counted on a sample, else none with the reason
// (MFU is then null, never a guess). Recomputation of checkpointed blocks is not useful work
// and is not counted.
FlopsPerSample TrainingFlopsPerSample(const TrainableModel& model, const ModelSpec& spec);

struct ThroughputAssessment {
  double achieved_flops = 0;  // FLOP/s
  double peak_flops = 0;
  double mfu = 0;  // achieved / peak, when valid
  bool valid = true;
  std::string note;  // why invalid
};
// `achieved_flops` is none when the model's FLOPs per sample are unknown (the team's model
// without model.flops_per_sample, counted on no sample): invalid, and the note says so.
ThroughputAssessment AssessThroughput(
    std::optional<double> achieved_flops, double peak_flops,
    const std::string& unknown_note = "FLOPs per sample unknown for this model");

}  // namespace trainerd
