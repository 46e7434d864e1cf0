#include "trainerd/trainer/semantics/training_fault.h"

#include <array>
#include <utility>

namespace trainerd {
namespace {

constexpr std::array<std::pair<TrainingFault, std::string_view>, 7> kNames = {{
    {TrainingFault::kNone, "none"},
    {TrainingFault::kLossPerMicrobatch, "loss_per_microbatch"},
    {TrainingFault::kStepPerMicrobatch, "step_per_microbatch"},
    {TrainingFault::kClipPerMicrobatch, "clip_per_microbatch"},
    {TrainingFault::kLrPerMicrobatch, "lr_per_microbatch"},
    {TrainingFault::kRecomputeFreshRng, "recompute_fresh_rng"},
    {TrainingFault::kInfGradient, "inf_gradient"},
}};

}  // namespace

std::optional<TrainingFault> ParseTrainingFault(std::string_view name) {
  for (const auto& [fault, text] : kNames) {
    if (text == name) return fault;
  }
  return std::nullopt;
}

std::string_view ToString(TrainingFault fault) {
  for (const auto& [value, text] : kNames) {
    if (value == fault) return text;
  }
  return "unknown";
}

}  // namespace trainerd
