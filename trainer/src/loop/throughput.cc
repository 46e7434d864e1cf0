#include "trainerd/trainer/loop/throughput.h"

namespace trainerd {

namespace {

// A frozen parameter (adapters.h) gets no weight gradient: of the 6 FLOPs per element and
// token that forward and backward cost, 2 are not done.
FlopsPerSample WithoutFrozenGradients(FlopsPerSample flops, const TrainableModel& model) {
  const std::int64_t total = CountParameters(model);
  const std::int64_t frozen = total - CountTrainableParameters(model);
  if (!flops.value || frozen == 0) return flops;
  *flops.value *= 1.0 - static_cast<double>(frozen) / (3.0 * static_cast<double>(total));
  flops.method += ", less the frozen parameters' weight gradients (a third of their share)";
  return flops;
}

}  // namespace

FlopsPerSample TrainingFlopsPerSample(const TrainableModel& model, const ModelSpec& spec) {
  if (spec.flops_per_sample) return {spec.flops_per_sample, "given: model.flops_per_sample"};
  if (std::optional<FlopsPerSample> own = model.TrainingFlops()) {
    return WithoutFrozenGradients(*own, model);
  }
  if (spec.loaded && spec.loaded->counted_flops_per_sample) {
    return WithoutFrozenGradients(
        {spec.loaded->counted_flops_per_sample,
         "counted: 3 x the matrix-product FLOPs of one forward (forward + backward)"},
        model);
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
