#include "trainerd/trainer/spec/plan_text.h"

#include <cstdio>

#include "trainerd/trainer/spec/units.h"

namespace trainerd {
namespace {

std::string Seconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g s", seconds);
  return text;
}

std::string SignedPercent(double fraction) {
  char text[32];
  std::snprintf(text, sizeof text, "%+.0f%%", fraction * 100);
  return text;
}

constexpr const char* kStepInBackwardText = "the optimizer step inside the backward";
constexpr const char* kOffloadText = "activations of the blocks not checkpointed on the host";

std::string OutputChunkText(const PlanSpec& plan) {
  return "output layer in chunks of " + std::to_string(plan.output_chunk) +
         (plan.output_chunk == 1 ? " position" : " positions");
}

}  // namespace

std::string DescribePlan(const PlanSpec& plan) {
  const std::size_t blocks = plan.checkpoint_blocks.size();
  return std::to_string(plan.microbatch) + " x " + std::to_string(plan.accumulation_steps) + ", " +
         std::to_string(blocks) + (blocks == 1 ? " block" : " blocks") + " checkpointed, " +
         ToString(plan.precision) +
         (plan.optimizer_state == StatePlacement::kHost ? ", optimizer state on the host" : "") +
         (plan.zero_stage > 0 ? ", ZeRO stage " + std::to_string(plan.zero_stage) : "") +
         (plan.output_chunk > 0 ? ", " + OutputChunkText(plan) : "") +
         (plan.step_in_backward ? ", " + std::string(kStepInBackwardText) : "") +
         (plan.offload_activations ? ", " + std::string(kOffloadText) : "");
}

std::string DescribeLevers(const PlanSpec& plan) {
  std::string text;
  const auto add = [&text](const std::string& lever, const char* category) {
    text += (text.empty() ? "" : ", ") + lever + " (" + category + ")";
  };
  if (plan.accumulation_steps > 1) {
    add(std::to_string(plan.accumulation_steps) + " microbatches", "activations");
  }
  const std::size_t blocks = plan.checkpoint_blocks.size();
  if (blocks > 0) {
    add(std::to_string(blocks) + (blocks == 1 ? " block" : " blocks") + " checkpointed",
        "activations");
  }
  if (plan.precision != Precision::kFp32) add(ToString(plan.precision), "activations");
  if (plan.optimizer_state == StatePlacement::kHost) {
    add("optimizer state on the host", "optimizer state");
  }
  if (plan.zero_stage == 1) add("optimizer state sharded over the ranks", "optimizer state");
  if (plan.zero_stage == 2) {
    add("gradients and optimizer state sharded over the ranks", "gradients, optimizer state");
  }
  if (plan.output_chunk > 0) add(OutputChunkText(plan), "output layer");
  if (plan.step_in_backward) add(kStepInBackwardText, "gradients");
  if (plan.offload_activations) add(kOffloadText, "activations");
  return text.empty() ? "none" : text;
}

std::string DescribeChosenTiming(const ChosenPlan& chosen) {
  std::string text = FormatDuration(chosen.predicted_duration_seconds);
  if (chosen.selection.noise > 0) {  // the rounds' spread: how far the figure may move
    char spread[48];
    std::snprintf(spread, sizeof spread, " (+-%.0f%%: its rounds' spread)",
                  chosen.selection.noise * 100);
    text += spread;
  }
  text += " at its measured " + Seconds(chosen.measured_update_seconds) + " per update";
  if (chosen.modelled_duration_seconds > 0) {  // unknown in reports stored before it was sent
    text += "; the time model predicted " + FormatDuration(chosen.modelled_duration_seconds) +
            " (" + SignedPercent(chosen.TimeModelError()) + ")";
  }
  return text;
}

std::string DescribeMemoryCounting(const ChosenPlan& chosen) {
  if (chosen.host_is_the_device) {
    return "on the CPU the host is the device: keeping the optimizer state on the host would "
           "free nothing, so the planner did not try it";
  }
  if (chosen.simulated_device) {
    return "the CPU simulates an accelerator (memory.simulated_device): memory kept on the host "
           "is outside its budget, as beside a GPU, and frees no real memory";
  }
  return "";
}

std::string DescribeRejectedTiming(const RejectedPlan& rejected, const ChosenPlan& chosen) {
  if (rejected.measured_update_seconds) {
    return "measured " + Seconds(*rejected.measured_update_seconds) + " per update against " +
           Seconds(chosen.measured_update_seconds);
  }
  return "time model " + FormatDuration(rejected.predicted_duration_seconds) + " against " +
         FormatDuration(chosen.modelled_duration_seconds) + " for the chosen plan";
}

std::string PlanText(const ChosenPlan& chosen) {
  std::string out = "plan: " + DescribePlan(chosen.plan) + "\n";
  out += "  levers: " + DescribeLevers(chosen.plan) + "\n";
  out += "  peak: predicted " + FormatBytes(chosen.predicted_peak_bytes) + ", measured " +
         FormatBytes(chosen.measured_peak_bytes) + ", usable " + FormatBytes(chosen.usable_bytes) +
         "\n";
  if (const std::string counting = DescribeMemoryCounting(chosen); !counting.empty()) {
    out += "  memory: " + counting + "\n";
  }
  const std::size_t timed =
      chosen.selection.timed.empty() ? 0 : chosen.selection.timed.front().update_seconds.size();
  out += "  time: job " + DescribeChosenTiming(chosen) + " (median of " + std::to_string(timed) +
         " timed updates)";
  if (chosen.window_seconds) {
    out += " against a window of " + FormatDuration(*chosen.window_seconds) +
           (chosen.fits_window ? " (fits)" : " -- NO PLAN FITS THE WINDOW");
  }
  out += "\n  probe and validation took " + FormatDuration(chosen.probe_seconds) + "\n";
  if (!chosen.rejected.empty()) out += "rejected alternatives:\n";
  for (const RejectedPlan& r : chosen.rejected) {
    out += "  " + DescribePlan(r.plan) + " (" + DescribeRejectedTiming(r, chosen) +
           "): " + r.reason + "\n";
  }
  return out;
}

}  // namespace trainerd
