// libFuzzer harness for the daemon config parser: any bytes as trainerd.yaml.
// ParseDaemonConfigText must return a config or an error naming the file, never throw, crash,
// leak or hit undefined behaviour; a config it accepts has absolute paths. Seeds:
// corpus/daemon_config/ (configs/trainerd.yaml, deploy/trainerd.yaml and variants).
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_check.h"
#include "trainerd/daemon/daemon_config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string kOrigin = "/fuzz/etc/trainerd.yaml";
  const std::string text(reinterpret_cast<const char*>(data), size);
  const trainerd::Result<trainerd::daemon::DaemonConfig> config =
      trainerd::daemon::ParseDaemonConfigText(text, kOrigin);
  using trainerd::fuzz::Expect;
  if (!config.ok()) {
    Expect(config.status().message().starts_with(kOrigin),
           "error does not name the file: " + config.status().message());
    return 0;
  }
  Expect(config->job_path.starts_with("/") && config->state_dir.starts_with("/") &&
             config->socket_path.starts_with("/"),
         "accepted config with a relative path");
  Expect(config->schedule.deadline_grace_seconds < config->schedule.window_seconds,
         "accepted a grace period not shorter than the window");
  return 0;
}
