#include "trainerd/daemon/systemd_notifier.h"

#include <systemd/sd-daemon.h>

#include <cstdint>

namespace trainerd::daemon {

void SystemdNotifier::Ready() const { sd_notify(0, "READY=1"); }

void SystemdNotifier::Status(const std::string& status) const {
  sd_notify(0, ("STATUS=" + status).c_str());
}

void SystemdNotifier::Reloading() const { sd_notify(0, "RELOADING=1"); }

void SystemdNotifier::Stopping() const { sd_notify(0, "STOPPING=1"); }

void SystemdNotifier::Watchdog() const { sd_notify(0, "WATCHDOG=1"); }

std::optional<std::chrono::microseconds> SystemdNotifier::WatchdogInterval() const {
  std::uint64_t usec = 0;
  if (sd_watchdog_enabled(0, &usec) <= 0 || usec == 0) return std::nullopt;
  return std::chrono::microseconds(usec / 2);
}

}  // namespace trainerd::daemon
