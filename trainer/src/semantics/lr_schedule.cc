#include "trainerd/trainer/semantics/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace trainerd {

double LearningRateAt(const OptimizerSpec& optimizer, const ScheduleSpec& schedule, int update,
                      int total_updates) {
  const int warmup = std::min(schedule.warmup_updates, total_updates);
  if (update < warmup) return optimizer.lr * (update + 1) / warmup;
  const int decay_span = std::max(1, total_updates - 1 - warmup);
  const double progress = std::clamp(static_cast<double>(update - warmup) / decay_span, 0.0, 1.0);
  return schedule.min_lr +
         0.5 * (optimizer.lr - schedule.min_lr) * (1.0 + std::cos(std::numbers::pi * progress));
}

}  // namespace trainerd
