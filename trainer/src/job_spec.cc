#include "trainerd/trainer/job_spec.h"

namespace trainerd {

const char* ToString(ModelKind kind) { return kind == ModelKind::kGpt ? "gpt" : "mlp"; }

const char* ToString(Precision precision) {
  switch (precision) {
    case Precision::kFp32:
      return "fp32";
    case Precision::kBf16:
      return "bf16";
    case Precision::kFp16:
      return "fp16";
  }
  return "?";
}

nlohmann::json ToJson(const PlanSpec& plan) {
  return {{"microbatch", plan.microbatch},
          {"accumulation_steps", plan.accumulation_steps},
          {"checkpoint_blocks", plan.checkpoint_blocks},
          {"precision", ToString(plan.precision)}};
}

int NumBlocks(const ModelSpec& model) {
  return model.kind == ModelKind::kGpt ? model.gpt.n_layer : model.mlp.layers;
}

bool HasBatchStatistics(const ModelSpec& model) {
  return model.kind == ModelKind::kMlpClassifier && model.mlp.batch_norm;
}

}  // namespace trainerd
