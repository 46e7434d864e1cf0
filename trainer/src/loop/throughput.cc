#include "trainerd/trainer/loop/throughput.h"

namespace trainerd {

FlopsPerSample ModelFlopsPerSample(const ModelSpec& model, std::int64_t parameters) {
  if (model.kind == ModelKind::kTorchScript || model.kind == ModelKind::kPlugin) {
    const OwnModelOptions& ts = model.own;
    if (ts.flops_per_sample) return {ts.flops_per_sample, "given: model.flops_per_sample"};
    if (ts.counted_flops_per_sample) {
      return {ts.counted_flops_per_sample,
              "counted: 3 x the matrix-product FLOPs of one forward (forward + backward)"};
    }
    return {std::nullopt, "FLOPs per sample unknown for this model (" + ts.flops_unknown_reason +
                              "): give model.flops_per_sample"};
  }
  if (model.kind == ModelKind::kMlpClassifier) {
    return {6.0 * static_cast<double>(parameters), "formula: 6 x parameters"};
  }
  const GptOptions& g = model.gpt;
  const double per_token = 6.0 * static_cast<double>(parameters) +
                           12.0 * g.n_layer * g.block_size * static_cast<double>(g.n_embd);
  return {per_token * g.block_size,
          "formula: (6 x parameters + 12 x n_layer x block_size x n_embd) per token"};
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
