#include "trainerd/daemon/clock.h"

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace trainerd::daemon {

double SystemClock::Now() const {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::chrono::milliseconds TimerDelay(double seconds) {
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::max(0.0, seconds) * 1000));
}

}  // namespace trainerd::daemon
