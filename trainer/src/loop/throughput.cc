#include "trainerd/trainer/loop/throughput.h"

namespace trainerd {

FlopsPerSample TrainingFlopsPerSample(const TrainableModel& model, const ModelSpec& spec) {
  if (spec.flops_per_sample) return {spec.flops_per_sample, "given: model.flops_per_sample"};
  if (std::optional<FlopsPerSample> own = model.TrainingFlops()) return *own;
  if (spec.loaded && spec.loaded->counted_flops_per_sample) {
    return {spec.loaded->counted_flops_per_sample,
            "counted: 3 x the matrix-product FLOPs of one forward (forward + backward)"};
  }
  const std::string why =
      spec.loaded ? spec.loaded->flops_unknown_reason : "it was not run on a sample to count them";
  return {std::nullopt,
          "FLOPs per sample unknown for this model (" + why + "): give model.flops_per_sample"};
}

ThroughputAssessment AssessThroughput(std::optional<double> achieved, double peak_flops,
                                      const std::string& unknown_note) {
  ThroughputAssessment a;
  a.peak_flops = peak_flops;
  if (!achieved) {
    a.valid = false;
    a.note = unknown_note;
    return a;
  }
  const double achieved_flops = *achieved;
  a.achieved_flops = achieved_flops;
  if (!(peak_flops > 0) || !(achieved_flops >= 0)) {
    a.valid = false;
    a.note = "no valid peak or achieved rate";
  } else if (achieved_flops > peak_flops) {
    a.valid = false;
    a.note =
        "achieved FLOP/s above the measured machine peak: the timing is wrong (unsynchronized "
        "device, warm-up counted, or wrong FLOP count), not a speedup";
  } else {
    a.mfu = achieved_flops / peak_flops;
  }
  return a;
}

}  // namespace trainerd
