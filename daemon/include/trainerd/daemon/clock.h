// The daemon's notion of now, behind an interface so that tests can set the time.
#pragma once

#include <chrono>

namespace trainerd::daemon {

class Clock {
 public:
  virtual ~Clock() = default;
  // Unix seconds (UTC, fractional).
  virtual double Now() const = 0;
};

// The system's real-time clock.
class SystemClock final : public Clock {
 public:
  double Now() const override;
};

// A steady-timer duration for a point `seconds` ahead on a Clock (at least zero): timers run
// on the steady clock, deadlines are Clock times.
std::chrono::milliseconds TimerDelay(double seconds);

}  // namespace trainerd::daemon
