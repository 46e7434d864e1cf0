// Learning rate as a function of the optimizer update index: linear warmup to the peak,
// then cosine decay to min_lr at the last update. A pure function, so a resumed run or a
// different plan (microbatch, accumulation) follows exactly the same schedule.
#pragma once

#include "trainerd/trainer/spec/job_spec.h"

namespace trainerd {

// `update` is 0-based, in [0, total_updates).
double LearningRateAt(const OptimizerSpec& optimizer, const ScheduleSpec& schedule, int update,
                      int total_updates);

}  // namespace trainerd
