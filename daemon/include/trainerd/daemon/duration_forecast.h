// The plan's duration against what training then took, night by night, and the correction the
// last nights on this hardware call for (docs/daemon.md, "The plan's duration"). The planner
// times its chosen plan alone, in a fresh process, for a few updates; the night's training runs
// the same updates among its evaluations, checkpoints and data reading, on a machine that may
// be doing other work. The ratio of the two is this hardware's and this daemon's, and it
// drifts: each night records its figures (a `plan_timing` event), and the next plan's duration
// is the planner's scaled by the median of the last nights' ratios, with their range as its
// interval.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "trainerd/store/store.h"

namespace trainerd::daemon {

// The event a night's PlanTiming is recorded as, on its run.
inline constexpr const char* kPlanTimingEvent = "plan_timing";

// One night's seconds per update, three ways.
struct PlanTiming {
  double modelled_update_seconds = 0;  // the time model's (0 where it had no figure)
  double planned_update_seconds = 0;   // the planner's timed update (its rounds' median)
  double trained_update_seconds = 0;   // the effective batch at training's samples per second

  // planned / trained - 1: how far the night's duration prediction was off.
  double PlanError() const;
  // modelled / trained - 1; 0 where the time model had no figure.
  double TimeModelError() const;
  // trained / planned: what the planner's figure is scaled by.
  double Ratio() const;
  // "an update took 0.25 s in training, the planner timed 0.2 s (-20%), its time model
  // predicted 0.3 s (+20%)" (the time model's part only where it had a figure).
  std::string Describe() const;
  std::string ToJson() const;
  // None for text that is not a PlanTiming's JSON or whose seconds are not all positive but
  // the time model's.
  static std::optional<PlanTiming> FromJson(const std::string& json);
};

// The last nights this many at most make the correction.
inline constexpr int kCorrectionNights = 5;

// The planner's duration scaled by the median ratio of the last nights (newest first, the
// first kCorrectionNights of them), the smallest and largest ratio its interval; factor 1 and
// no nights where there are none.
struct DurationCorrection {
  int nights = 0;
  double factor = 1;
  double low = 1;
  double high = 1;

  std::string ToJson() const;
  // No nights for text that is not a DurationCorrection's JSON.
  static DurationCorrection FromJson(const std::string& json);
  // "x1.12 by the last 3 nights on this hardware (x0.95 to x1.30)", or "" with no nights.
  std::string Describe() const;
};
DurationCorrection CorrectionFrom(const std::vector<PlanTiming>& newest_first);

// The `plan_timing` figures of the newest succeeded runs on `hardware` (null: any), newest
// first, at most `nights`; a store that cannot be read gives none (the plan goes
// uncorrected).
std::vector<PlanTiming> RecordedPlanTimings(store::Store& store,
                                            const store::HardwareFingerprint* hardware,
                                            int nights = kCorrectionNights);

}  // namespace trainerd::daemon
