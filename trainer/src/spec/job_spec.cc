#include "trainerd/trainer/spec/job_spec.h"

#include <algorithm>

#include "trainerd/trainer/spec/model_kind.h"

namespace trainerd {

std::optional<std::string> OffloadActivationsRefusal(const JobSpec& spec) {
  if (!HostIsTheDevice(spec)) return std::nullopt;
  return std::string(
      "false on the CPU, where the host is the device (activations moved to host memory would "
      "free nothing; memory.simulated_device: true simulates an accelerator)");
}

std::optional<std::string> StepInBackwardRefusal(const PlanSpec& plan, const ModelSpec& model,
                                                 const DistributedSpec& distributed) {
  if (plan.accumulation_steps > 1) {
    return "false with " + std::to_string(plan.accumulation_steps) +
           " accumulation steps (a gradient is complete after the backward of an update's only "
           "microbatch, not before the last of several)";
  }
  if (distributed.ranks > 1 || distributed.job_ranks > 1) {
    return std::string(
        "false with distributed.ranks above 1 (the ranks' gradients are summed "
        "after the backward)");
  }
  if (plan.optimizer_state == StatePlacement::kHost) {
    return std::string(
        "false with optimizer_state: host (the step runs on the device, where "
        "the gradients are)");
  }
  if (plan.precision == Precision::kFp16) {
    return std::string(
        "false with precision fp16 (its loss scaler checks every gradient for "
        "an overflow before any step)");
  }
  if (model.loss.kind == LossKind::kModule) {
    return std::string(
        "false with model.loss: module (a module's own loss is divided by the "
        "update's count after the backward)");
  }
  return std::nullopt;
}

const char* ToString(ModelInputs inputs) { return kModelInputsNames.Name(inputs); }
const char* ToString(LossKind kind) { return kLossKindNames.Name(kind); }
const char* ToString(Precision precision) { return kPrecisionNames.Name(precision); }
const char* ToString(StatePlacement placement) { return kStatePlacementNames.Name(placement); }
const char* ToString(Launcher launcher) { return kLauncherNames.Name(launcher); }
const char* ToString(FinetuneMethod method) { return kFinetuneMethodNames.Name(method); }

nlohmann::json ToJson(const FinetuneSpec& f) {
  return {{"method", ToString(f.method)},
          {"rank", f.rank},
          {"alpha", f.alpha},
          {"dropout", f.dropout},
          {"base_dtype", ToString(f.base_dtype)},
          {"targets", f.targets}};
}

bool TargetNamesModule(const std::string& target, const std::string& path) {
  return path == target || (path.size() > target.size() && path.ends_with(target) &&
                            path[path.size() - target.size() - 1] == '.');
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
  rank.distributed.job_ranks = job.distributed.ranks;
  return rank;
}

int NumBlocks(const ModelSpec& model) {
  if (model.loaded) return model.loaded->blocks;
  return ModelKindOf(model).DeclaredBlocks(model).value_or(0);
}

bool BlocksKnown(const ModelSpec& model) {
  return model.loaded || ModelKindOf(model).DeclaredBlocks(model).has_value();
}

bool HasBatchStatistics(const ModelSpec& model) {
  if (model.loaded) return model.loaded->batch_statistics;
  return ModelKindOf(model).DeclaredBatchStatistics(model).value_or(false);
}

}  // namespace trainerd
