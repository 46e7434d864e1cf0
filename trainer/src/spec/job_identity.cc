#include "trainerd/trainer/spec/job_identity.h"

#include <nlohmann/json.hpp>

#include "trainerd/common/sha256.h"
#include "trainerd/trainer/spec/data_format.h"
#include "trainerd/trainer/spec/model_kind.h"

namespace trainerd {
namespace {

nlohmann::json Without(nlohmann::json options, const std::vector<std::string>& keys) {
  for (const std::string& key : keys) options.erase(key);
  return options;
}

}  // namespace

std::string JobIdentity(const JobSpec& spec, const std::string& data_fingerprint) {
  const ModelSpec& m = spec.model;
  const OptimizerSpec& o = spec.optimizer;
  const TrainingSpec& t = spec.training;
  nlohmann::json canonical = {
      {"model",
       {{"kind", m.kind},
        {"options", Without(m.options, ModelKindOf(m).NonIdentityKeys())},
        {"block_size", m.block_size},
        {"inputs", ToString(m.inputs)},
        {"loss", {{"kind", ToString(m.loss.kind)}, {"ignore_index", m.loss.ignore_index}}},
        {"file_sha256", m.loaded ? m.loaded->file_sha256 : ""}}},
      {"init", spec.init_from.sha256},
      {"data",
       {{"fingerprint", data_fingerprint},
        {"format", spec.data.format},
        {"options", Without(spec.data.options, DataFormatOf(spec.data).NonIdentityKeys())}}},
      {"adamw",
       {{"lr", o.lr},
        {"beta1", o.beta1},
        {"beta2", o.beta2},
        {"weight_decay", o.weight_decay},
        {"eps", o.eps}}},
      {"schedule",
       {{"warmup_updates", spec.schedule.warmup_updates}, {"min_lr", spec.schedule.min_lr}}},
      {"training",
       {{"effective_batch", t.effective_batch},
        {"updates", t.updates},
        {"grad_clip", t.grad_clip},
        {"seed", t.seed}}},
  };
  // Since weight decay skips biases and normalization weights (device/weight_decay.h), a job
  // that decays says so: its checkpoints from before, which decayed every tensor, are another
  // job's, and the night starts afresh rather than continue under other arithmetic.
  if (o.weight_decay > 0) canonical["adamw"]["decays"] = "matrices";
  // Only an adapter job says how it fine-tunes: full training's identities stay what they were.
  if (spec.finetune.method != FinetuneMethod::kFull) canonical["finetune"] = ToJson(spec.finetune);
  // Keys sorted, numbers printed to round-trip: the same job always hashes the same.
  return Sha256Hex(canonical.dump());
}

}  // namespace trainerd
