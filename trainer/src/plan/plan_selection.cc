#include "trainerd/trainer/plan/plan_selection.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <tuple>

#include "trainerd/common/median.h"

namespace trainerd {
namespace {

bool EvenSplit(const PlanSpec& plan, int effective_batch) {
  return effective_batch % plan.microbatch == 0;
}

std::string Percent(double fraction) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f%%", fraction * 100);
  return text;
}

}  // namespace

bool PreferredOnTie(const PlanSpec& a, const PlanSpec& b, int effective_batch) {
  const auto key = [effective_batch](const PlanSpec& p) {
    return std::make_tuple(!EvenSplit(p, effective_batch), p.accumulation_steps,
                           p.checkpoint_blocks.size(), p.microbatch, static_cast<int>(p.precision));
  };
  return key(a) < key(b);
}

double RepeatedTimingNoise(const std::vector<TimedPlan>& plans) {
  std::vector<double> spreads;
  for (const TimedPlan& p : plans) {
    if (p.update_seconds.size() < 2) continue;
    const auto [low, high] = std::minmax_element(p.update_seconds.begin(), p.update_seconds.end());
    const double median = p.MedianSeconds();
    if (median > 0) spreads.push_back((*high - *low) / median);
  }
  return spreads.empty() ? 0.0 : Median(spreads);
}

PlanSelection SelectFastestPlan(const std::vector<TimedPlan>& plans, int effective_batch) {
  PlanSelection s;
  s.noise = RepeatedTimingNoise(plans);
  s.tie_band = std::min(s.noise, kMaxTieBand);
  double fastest = plans.front().MedianSeconds();
  for (const TimedPlan& p : plans) fastest = std::min(fastest, p.MedianSeconds());
  for (std::size_t i = 0; i < plans.size(); ++i) {
    if (plans[i].MedianSeconds() <= fastest * (1 + s.tie_band)) s.tied.push_back(i);
  }
  std::sort(s.tied.begin(), s.tied.end(), [&](std::size_t a, std::size_t b) {
    return PreferredOnTie(plans[a].plan, plans[b].plan, effective_batch);
  });
  s.chosen = s.tied.front();
  return s;
}

std::string WhyNotChosen(const PlanSelection& selection, const std::vector<TimedPlan>& plans,
                         std::size_t plan, int effective_batch) {
  const double chosen = plans[selection.chosen].MedianSeconds();
  const double slower = plans[plan].MedianSeconds() / chosen - 1;
  const std::string rounds = std::to_string(plans[plan].update_seconds.size());
  if (std::find(selection.tied.begin(), selection.tied.end(), plan) == selection.tied.end()) {
    return "timed in " + rounds + " interleaved round(s): its median update was " +
           Percent(slower) + " slower than the chosen plan's";
  }
  const PlanSpec& a = plans[selection.chosen].plan;
  const PlanSpec& b = plans[plan].plan;
  std::string preference;
  if (EvenSplit(a, effective_batch) != EvenSplit(b, effective_batch)) {
    preference = "an even split of the batch";
  } else if (a.accumulation_steps != b.accumulation_steps) {
    preference = "fewer accumulation steps";
  } else if (a.checkpoint_blocks.size() != b.checkpoint_blocks.size()) {
    preference = "fewer checkpointed blocks";
  } else if (a.microbatch != b.microbatch) {
    preference = "the smaller microbatch";
  } else {
    preference = "fp32 before bf16 before fp16";
  }
  const std::string apart = Percent(std::fabs(slower)) + (slower < 0 ? " faster" : " slower");
  return "tied with the chosen plan (its median " + apart + ", within the measured noise of " +
         Percent(selection.tie_band) + "); the tie-break prefers " + preference;
}

}  // namespace trainerd
