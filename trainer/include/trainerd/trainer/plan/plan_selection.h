// The planner's last step: choosing among plans that were each timed in several interleaved
// rounds. Close candidates (32 x 1, 16 x 2, 8 x 4 on a roomy budget) differ by less than one
// timing's noise, so the fastest single measurement is a coin toss from night to night. Here a
// plan's time is the median of its rounds; the noise is the spread of those repeated timings
// of one plan; plans within that spread of the fastest (at most kMaxTieBand) are tied, and a
// tie is broken by a fixed preference so that the same candidates give the same choice.
// Pure arithmetic: no torch, no clock.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "trainerd/trainer/spec/job_spec.h"
#include "trainerd/trainer/spec/worker_protocol.h"  // TimedPlan

namespace trainerd {

// A tie-break never gives up more than this fraction of the fastest median, however noisy
// the rounds were.
inline constexpr double kMaxTieBand = 0.03;

struct PlanSelection {
  std::size_t chosen = 0;         // index into the timed plans
  double noise = 0;               // median relative spread (max - min) / median of one plan
  double tie_band = 0;            // min(noise, kMaxTieBand)
  std::vector<std::size_t> tied;  // within the band of the fastest median, chosen first
};

// True when `a` is preferred to `b` among tied plans: an even split of the effective batch
// (every microbatch the same size), then fewer accumulation steps, then fewer checkpointed
// blocks, then the smaller microbatch, then fp32 before bf16 before fp16.
bool PreferredOnTie(const PlanSpec& a, const PlanSpec& b, int effective_batch);

// The median relative spread of the plans timed at least twice; 0 when none was.
double RepeatedTimingNoise(const std::vector<TimedPlan>& plans);

// REQUIRES: plans not empty, each with at least one timing.
PlanSelection SelectFastestPlan(const std::vector<TimedPlan>& plans, int effective_batch);

// Why `plan` (not chosen) lost to the chosen one, for the planner's rejected list.
std::string WhyNotChosen(const PlanSelection& selection, const std::vector<TimedPlan>& plans,
                         std::size_t plan, int effective_batch);

}  // namespace trainerd
