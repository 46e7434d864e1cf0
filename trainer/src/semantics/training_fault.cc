#include "trainerd/trainer/semantics/training_fault.h"

#include "trainerd/common/enum_names.h"

namespace trainerd {
namespace {

constexpr EnumNames<TrainingFault, 14> kNames{{{
    {TrainingFault::kNone, "none"},
    {TrainingFault::kLossPerMicrobatch, "loss_per_microbatch"},
    {TrainingFault::kStepPerMicrobatch, "step_per_microbatch"},
    {TrainingFault::kClipPerMicrobatch, "clip_per_microbatch"},
    {TrainingFault::kLrPerMicrobatch, "lr_per_microbatch"},
    {TrainingFault::kRecomputeFreshRng, "recompute_fresh_rng"},
    {TrainingFault::kInfGradient, "inf_gradient"},
    {TrainingFault::kWeightDecayPerMicrobatch, "weight_decay_per_microbatch"},
    {TrainingFault::kFrozenParameter, "frozen_parameter"},
    {TrainingFault::kOverflowFirstUpdate, "overflow_first_update"},
    {TrainingFault::kStaleHostWeights, "stale_host_weights"},
    {TrainingFault::kChunkDropsAToken, "chunk_drops_a_token"},
    {TrainingFault::kStepBeforeClip, "step_before_clip"},
    {TrainingFault::kOffloadRestoredStale, "offload_restored_stale"},
}}};

}  // namespace

std::optional<TrainingFault> ParseTrainingFault(std::string_view name) {
  return kNames.Parse(name);
}

std::string_view ToString(TrainingFault fault) { return kNames.Name(fault); }

}  // namespace trainerd
