// The daemon's side of the systemd service protocol (sd_notify(3)): READY=1 once the store is
// open, STATUS= with the current phase, WATCHDOG=1 from a timer on the event loop,
// RELOADING=1 and STOPPING=1. Outside systemd (no $NOTIFY_SOCKET) every call does nothing.
#pragma once

#include <chrono>
#include <optional>
#include <string>

namespace trainerd::daemon {

class SystemdNotifier {
 public:
  void Ready() const;
  void Status(const std::string& status) const;
  void Reloading() const;
  void Stopping() const;
  void Watchdog() const;
  // Half the service's WatchdogSec, the interval to ping at; empty when the watchdog is off.
  std::optional<std::chrono::microseconds> WatchdogInterval() const;
};

}  // namespace trainerd::daemon
