#include "trainerd/trainer/spec/job_spec.h"

#include <algorithm>

namespace trainerd {

const char* ToString(ModelKind kind) {
  switch (kind) {
    case ModelKind::kGpt:
      return "gpt";
    case ModelKind::kMlpClassifier:
      return "mlp";
    case ModelKind::kTorchScript:
      return "torchscript";
    case ModelKind::kPlugin:
      return "plugin";
  }
  return "?";
}

const char* ToString(ModelInputs inputs) {
  switch (inputs) {
    case ModelInputs::kTokens:
      return "tokens";
    case ModelInputs::kByteHistogram:
      return "byte_histogram";
    case ModelInputs::kRows:
      return "rows";
  }
  return "?";
}

const char* ToString(LossKind kind) {
  switch (kind) {
    case LossKind::kCrossEntropy:
      return "cross_entropy";
    case LossKind::kMse:
      return "mse";
    case LossKind::kModule:
      return "module";
  }
  return "?";
}

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

const char* ToString(Launcher launcher) {
  switch (launcher) {
    case Launcher::kLocal:
      return "local";
    case Launcher::kTorchrun:
      return "torchrun";
    case Launcher::kSlurm:
      return "slurm";
  }
  return "?";
}

RankShare ShareOfRank(int effective_batch, int ranks, int rank) {
  const int base = effective_batch / ranks;
  const int extra = effective_batch % ranks;
  return {rank * base + std::min(rank, extra), base + (rank < extra ? 1 : 0)};
}

JobSpec RankJob(const JobSpec& job) {
  JobSpec rank = job;
  rank.training.effective_batch =
      ShareOfRank(job.training.effective_batch, job.distributed.ranks, 0).count;
  rank.distributed.ranks = 1;
  return rank;
}

nlohmann::json ToJson(const PlanSpec& plan) {
  return {{"microbatch", plan.microbatch},
          {"accumulation_steps", plan.accumulation_steps},
          {"checkpoint_blocks", plan.checkpoint_blocks},
          {"precision", ToString(plan.precision)}};
}

int NumBlocks(const ModelSpec& model) {
  switch (model.kind) {
    case ModelKind::kGpt:
      return model.gpt.n_layer;
    case ModelKind::kMlpClassifier:
      return model.mlp.layers;
    case ModelKind::kTorchScript:
    case ModelKind::kPlugin:
      return model.own.num_blocks;
  }
  return 0;
}

bool HasBatchStatistics(const ModelSpec& model) {
  switch (model.kind) {
    case ModelKind::kGpt:
      return false;
    case ModelKind::kMlpClassifier:
      return model.mlp.batch_norm;
    case ModelKind::kTorchScript:
    case ModelKind::kPlugin:
      return model.own.has_batch_statistics;
  }
  return false;
}

}  // namespace trainerd
