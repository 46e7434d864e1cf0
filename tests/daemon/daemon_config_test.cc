#include "trainerd/daemon/daemon_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "../support/temp_dir.h"
#include "trainerd/trainer/spec/job_spec_parser.h"

namespace trainerd::daemon {
namespace {

namespace fs = std::filesystem;

std::string SourceDir() {
  const char* dir = std::getenv("TRAINERD_SOURCE_DIR");
  return dir != nullptr ? dir : ".";
}

// Parses `yaml` as if it were the file "trainerd.yaml" and returns the error message.
std::string ErrorOf(const std::string& yaml) {
  Result<DaemonConfig> config = ParseDaemonConfigText(yaml, "trainerd.yaml");
  EXPECT_FALSE(config.ok()) << "expected an error for:\n" << yaml;
  if (config.ok()) return "";
  EXPECT_EQ(config.status().code(), Status::Code::kInvalidArgument);
  return config.status().message();
}

TEST(DaemonConfigTest, DefaultsFillOmittedKeys) {
  Result<DaemonConfig> config =
      ParseDaemonConfigText("job: default.yaml\n", "/etc/trainerd/trainerd.yaml");
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->source_path, "/etc/trainerd/trainerd.yaml");
  EXPECT_EQ(config->job_path, "/etc/trainerd/default.yaml");
  EXPECT_EQ(config->schedule.start_minute, 90);
  EXPECT_EQ(config->schedule.timezone, "UTC");
  EXPECT_DOUBLE_EQ(config->schedule.window_seconds, 21600);
  EXPECT_DOUBLE_EQ(config->schedule.deadline_grace_seconds, 120);
  EXPECT_EQ(config->state_dir, "/etc/trainerd/state");
  EXPECT_EQ(config->socket_path, "/etc/trainerd/state/trainerd.sock");
  EXPECT_EQ(config->database_path(), "/etc/trainerd/state/trainerd.db");
  EXPECT_EQ(config->metrics_listen, "127.0.0.1:9464");
  EXPECT_DOUBLE_EQ(config->cost.per_device_hour, 0);
  EXPECT_EQ(config->cost.currency, "USD");
  EXPECT_DOUBLE_EQ(config->regression.throughput_tolerance, 0.25);
  EXPECT_DOUBLE_EQ(config->regression.eval_loss_tolerance, 0.02);
  EXPECT_TRUE(config->regression.slice_tolerances.empty());
  EXPECT_DOUBLE_EQ(config->regression.gate_confidence, 0.95);
  EXPECT_DOUBLE_EQ(config->regression.baseline_margin, 0.01);
  EXPECT_DOUBLE_EQ(config->outcomes.confidence, 0.95);
  EXPECT_EQ(config->max_attempts, 4);
  EXPECT_EQ(config->parity_updates, 3);
  EXPECT_EQ(config->worker_path, "");
}

TEST(DaemonConfigTest, FullFileSetsEveryValue) {
  const std::string yaml = R"(job: jobs/nightly.yaml
schedule:
  start: "23:05"
  timezone: local
  window: 1h30m
  deadline_grace: 45s
state_dir: ../state/trainerd
control:
  socket: /run/trainerd/trainerd.sock
metrics:
  listen: "[::1]:9100"
cost:
  per_device_hour: 0.35
  currency: EUR
regression:
  throughput_tolerance: 10%
  eval_loss_tolerance: 0.05
  slice_tolerances:
    GPL-3: 5%
    MIT: 0.5
  gate_confidence: 99%
  baseline_margin: 2%
retries:
  max_attempts: 16
parity:
  updates: 10
worker:
  path: bin/trainer-run
)";
  Result<DaemonConfig> config = ParseDaemonConfigText(yaml, "/srv/conf/trainerd.yaml");
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->job_path, "/srv/conf/jobs/nightly.yaml");
  EXPECT_EQ(config->schedule.start_minute, 23 * 60 + 5);
  EXPECT_EQ(config->schedule.timezone, "local");
  EXPECT_DOUBLE_EQ(config->schedule.window_seconds, 5400);
  EXPECT_DOUBLE_EQ(config->schedule.deadline_grace_seconds, 45);
  EXPECT_EQ(config->state_dir, "/srv/state/trainerd");
  EXPECT_EQ(config->database_path(), "/srv/state/trainerd/trainerd.db");
  EXPECT_EQ(config->socket_path, "/run/trainerd/trainerd.sock");
  EXPECT_EQ(config->metrics_listen, "[::1]:9100");
  EXPECT_DOUBLE_EQ(config->cost.per_device_hour, 0.35);
  EXPECT_EQ(config->cost.currency, "EUR");
  EXPECT_DOUBLE_EQ(config->regression.throughput_tolerance, 0.10);
  EXPECT_DOUBLE_EQ(config->regression.eval_loss_tolerance, 0.05);
  EXPECT_EQ(config->regression.slice_tolerances.size(), 2u);
  EXPECT_DOUBLE_EQ(config->regression.ToleranceFor("GPL-3"), 0.05);
  EXPECT_DOUBLE_EQ(config->regression.ToleranceFor("MIT"), 0.5);
  EXPECT_DOUBLE_EQ(config->regression.ToleranceFor("Apache-2.0"), 0.05);
  EXPECT_DOUBLE_EQ(config->regression.gate_confidence, 0.99);
  EXPECT_DOUBLE_EQ(config->regression.baseline_margin, 0.02);
  EXPECT_EQ(config->max_attempts, 16);
  EXPECT_EQ(config->parity_updates, 10);
  EXPECT_EQ(config->worker_path, "/srv/conf/bin/trainer-run");
}

TEST(DaemonConfigTest, OutcomesListTheWatchedMetricsWithDefaults) {
  Result<DaemonConfig> config = ParseDaemonConfigText(
      "job: j.yaml\noutcomes:\n  metrics:\n"
      "    - {name: ctr, better: higher}\n"
      "    - {name: refund_rate, better: lower, maturity: 168h, min_count: 50, tolerance: 5%}\n"
      "  slices: [en, de]\n  check_interval: 10m\n  confidence: 99%\n",
      "trainerd.yaml");
  ASSERT_TRUE(config.ok()) << config.status().message();
  const OutcomesConfig& outcomes = config->outcomes;
  ASSERT_EQ(outcomes.metrics.size(), 2u);
  EXPECT_EQ(outcomes.metrics[0].name, "ctr");
  EXPECT_TRUE(outcomes.metrics[0].higher_is_better);
  EXPECT_EQ(outcomes.metrics[0].maturity_seconds, 72 * 3600);
  EXPECT_EQ(outcomes.metrics[0].min_count, 100);
  EXPECT_DOUBLE_EQ(outcomes.metrics[0].tolerance, 0.02);
  EXPECT_FALSE(outcomes.metrics[1].higher_is_better);
  EXPECT_EQ(outcomes.metrics[1].maturity_seconds, 7 * 24 * 3600);
  EXPECT_EQ(outcomes.metrics[1].min_count, 50);
  EXPECT_DOUBLE_EQ(outcomes.metrics[1].tolerance, 0.05);
  EXPECT_EQ(outcomes.slices, (std::vector<std::string>{"en", "de"}));
  EXPECT_EQ(outcomes.check_interval_seconds, 600);
  EXPECT_DOUBLE_EQ(outcomes.confidence, 0.99);
  EXPECT_EQ(outcomes.Metric("refund_rate"), &outcomes.metrics[1]);
  EXPECT_EQ(outcomes.Metric("clicks"), nullptr);
}

TEST(DaemonConfigTest, RetentionKeepsTenReleasesAndThirtyDaysOfFilesUnlessTold) {
  Result<DaemonConfig> defaults = ParseDaemonConfigText("job: j.yaml\n", "trainerd.yaml");
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->retention.releases, 10);
  EXPECT_EQ(defaults->retention.files_seconds, 30 * 24 * 3600);
  Result<DaemonConfig> told = ParseDaemonConfigText(
      "job: j.yaml\nretention: {releases: 3, files: 168h}\n", "trainerd.yaml");
  ASSERT_TRUE(told.ok()) << told.status().message();
  EXPECT_EQ(told->retention.releases, 3);
  EXPECT_EQ(told->retention.files_seconds, 7 * 24 * 3600);
}

TEST(DaemonConfigTest, ParityUpdatesZeroTurnsTheParityCheckOff) {
  Result<DaemonConfig> config =
      ParseDaemonConfigText("job: j.yaml\nparity: {updates: 0}\n", "/etc/trainerd/trainerd.yaml");
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->parity_updates, 0);
}

TEST(DaemonConfigTest, AbsolutePathsAreKeptButNormalised) {
  Result<DaemonConfig> config = ParseDaemonConfigText(
      "job: /opt/jobs/../jobs/a.yaml\nstate_dir: /var/lib/trainerd/\nworker:\n  path: "
      "/usr/bin/trainer-run\n",
      "/etc/trainerd/trainerd.yaml");
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->job_path, "/opt/jobs/a.yaml");
  EXPECT_EQ(config->state_dir, "/var/lib/trainerd");
  EXPECT_EQ(config->socket_path, "/var/lib/trainerd/trainerd.sock");
  EXPECT_EQ(config->database_path(), "/var/lib/trainerd/trainerd.db");
  EXPECT_EQ(config->worker_path, "/usr/bin/trainer-run");
}

TEST(DaemonConfigTest, RelativeOriginIsAnchoredAtTheCurrentDirectory) {
  Result<DaemonConfig> config =
      ParseDaemonConfigText("job: default.yaml\nstate_dir: ./run/../st\n", "conf/trainerd.yaml");
  ASSERT_TRUE(config.ok()) << config.status().message();
  const fs::path cwd = fs::current_path();
  EXPECT_EQ(config->source_path, "conf/trainerd.yaml");
  EXPECT_EQ(config->job_path, (cwd / "conf" / "default.yaml").string());
  EXPECT_EQ(config->state_dir, (cwd / "conf" / "st").string());
  EXPECT_EQ(config->socket_path, (cwd / "conf" / "st" / "trainerd.sock").string());
}

TEST(DaemonConfigTest, EmptyListenDisablesMetrics) {
  Result<DaemonConfig> config =
      ParseDaemonConfigText("job: j.yaml\nmetrics:\n  listen: \"\"\n", "/c/trainerd.yaml");
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->metrics_listen, "");
}

TEST(DaemonConfigTest, AcceptedListenAddresses) {
  for (const std::string listen : {"0.0.0.0:1", "localhost:65535", "metrics-host.example:9464"}) {
    Result<DaemonConfig> config = ParseDaemonConfigText(
        "job: j.yaml\nmetrics:\n  listen: \"" + listen + "\"\n", "/c/trainerd.yaml");
    ASSERT_TRUE(config.ok()) << listen << ": " << config.status().message();
    EXPECT_EQ(config->metrics_listen, listen);
  }
}

TEST(DaemonConfigTest, GraceMayBeZeroAndWindowMayBeADay) {
  Result<DaemonConfig> config = ParseDaemonConfigText(
      "job: j.yaml\nschedule:\n  window: 24h\n  deadline_grace: 0s\n  start: '0:00'\n",
      "/c/trainerd.yaml");
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_DOUBLE_EQ(config->schedule.window_seconds, 86400);
  EXPECT_DOUBLE_EQ(config->schedule.deadline_grace_seconds, 0);
  EXPECT_EQ(config->schedule.start_minute, 0);
}

TEST(DaemonConfigTest, TimezoneNamesAFileInZoneinfo) {
  if (!fs::exists("/usr/share/zoneinfo/Europe/Berlin")) {
    GTEST_SKIP() << "tzdata is not installed";
  }
  Result<DaemonConfig> config = ParseDaemonConfigText(
      "job: j.yaml\nschedule:\n  timezone: Europe/Berlin\n", "/c/trainerd.yaml");
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->schedule.timezone, "Europe/Berlin");
}

TEST(DaemonConfigTest, LocalTimezoneTheDatabaseCannotReadIsAConfigError) {
  const char* saved = std::getenv("TZ");
  const std::optional<std::string> previous =
      saved ? std::optional<std::string>(saved) : std::nullopt;
  ::setenv("TZ", "XYZ3", 1);  // a POSIX rule, not a zone name
  Result<DaemonConfig> config =
      ParseDaemonConfigText("job: j.yaml\nschedule:\n  timezone: local\n", "/c/trainerd.yaml");
  if (previous) {
    ::setenv("TZ", previous->c_str(), 1);
  } else {
    ::unsetenv("TZ");
  }
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(),
              ::testing::HasSubstr("trainerd.yaml:3: schedule.timezone: expected a local timezone "
                                   "the database has (timezone local (TZ=XYZ3)"));
  EXPECT_THAT(config.status().message(), ::testing::HasSubstr("got 'local'"));
}

struct ErrorCase {
  std::string yaml;
  std::string expected;  // a substring of the error, from "file:line: key:" on
};

TEST(DaemonConfigTest, ErrorsNameFileLineKeyAndValue) {
  const std::string kTzExpected =
      "expected UTC, local or a timezone name in /usr/share/zoneinfo such as Europe/Berlin, got ";
  const std::string kListenExpected =
      "expected host:port with a port in 1-65535 such as 127.0.0.1:9464, or \"\" to disable, "
      "got ";
  const std::vector<ErrorCase> cases = {
      {"job: j.yaml\nschedule:\n  start: '25:00'\n",
       "trainerd.yaml:3: schedule.start: expected HH:MM (00:00-23:59), got '25:00'"},
      {"job: j.yaml\nschedule:\n  start: '01:60'\n",
       "trainerd.yaml:3: schedule.start: expected HH:MM (00:00-23:59), got '01:60'"},
      {"job: j.yaml\nschedule:\n  start: '1:5'\n",
       "trainerd.yaml:3: schedule.start: expected HH:MM (00:00-23:59), got '1:5'"},
      {"job: j.yaml\nschedule:\n  start: 130\n",
       "trainerd.yaml:3: schedule.start: expected HH:MM (00:00-23:59), got '130'"},
      {"job: j.yaml\nschedule:\n  timezone: Mars/Olympus_Mons\n",
       "trainerd.yaml:3: schedule.timezone: " + kTzExpected + "'Mars/Olympus_Mons'"},
      {"job: j.yaml\nschedule:\n  timezone: ../../etc/passwd\n",
       "trainerd.yaml:3: schedule.timezone: " + kTzExpected + "'../../etc/passwd'"},
      {"job: j.yaml\nschedule:\n  timezone: zone.tab\n",
       "trainerd.yaml:3: schedule.timezone: " + kTzExpected + "'zone.tab'"},
      {"job: j.yaml\nschedule:\n  timezone: utc\n",
       "trainerd.yaml:3: schedule.timezone: " + kTzExpected + "'utc'"},
      {"job: j.yaml\nshedule:\n  start: '01:30'\n", "trainerd.yaml:2: shedule: unknown key"},
      {"job: j.yaml\nschedule:\n  begin: '01:30'\n",
       "trainerd.yaml:3: schedule.begin: unknown key"},
      {"job: j.yaml\nschedule: 5\n", "trainerd.yaml:2: schedule: expected a mapping, got '5'"},
      {"job: j.yaml\nschedule:\n  window: 0\n",
       "trainerd.yaml:3: schedule.window: expected a duration in (0s, 24h] such as 6h, 90m or "
       "45s, got '0'"},
      {"job: j.yaml\nschedule:\n  window: 25h\n",
       "trainerd.yaml:3: schedule.window: expected a duration in (0s, 24h] such as 6h, 90m or "
       "45s, got '25h'"},
      {"job: j.yaml\nschedule:\n  deadline_grace: -1m\n",
       "trainerd.yaml:3: schedule.deadline_grace: expected a duration in [0s, 24h] such as 6h, "
       "90m or 45s, got '-1m'"},
      {"job: j.yaml\nschedule:\n  window: 1h\n  deadline_grace: 60m\n",
       "trainerd.yaml:4: schedule.deadline_grace: expected a duration shorter than "
       "schedule.window (1h 00m), got '60m'"},
      {"job: j.yaml\nschedule:\n  window: 1m\n",
       "trainerd.yaml:3: schedule.window: expected a duration longer than "
       "schedule.deadline_grace (2m 00s), got '1m'"},
      {"job: j.yaml\nmetrics:\n  listen: localhost\n",
       "trainerd.yaml:3: metrics.listen: " + kListenExpected + "'localhost'"},
      {"job: j.yaml\nmetrics:\n  listen: 127.0.0.1:0\n",
       "trainerd.yaml:3: metrics.listen: " + kListenExpected + "'127.0.0.1:0'"},
      {"job: j.yaml\nmetrics:\n  listen: 127.0.0.1:65536\n",
       "trainerd.yaml:3: metrics.listen: " + kListenExpected + "'127.0.0.1:65536'"},
      {"job: j.yaml\nmetrics:\n  listen: ':9464'\n",
       "trainerd.yaml:3: metrics.listen: " + kListenExpected + "':9464'"},
      {"job: j.yaml\nmetrics:\n  listen: 127.0.0.1:http\n",
       "trainerd.yaml:3: metrics.listen: " + kListenExpected + "'127.0.0.1:http'"},
      {"schedule:\n  start: '01:30'\n",
       "trainerd.yaml:1: job: expected the path of a job spec file, got nothing"},
      {"job: ''\n", "trainerd.yaml:1: job: expected a non-empty path, got ''"},
      {"job: [a, b]\n", "trainerd.yaml:1: job: expected a string, got a list"},
      {"job: j.yaml\nretries:\n  max_attempts: 0\n",
       "trainerd.yaml:3: retries.max_attempts: expected an integer in [1, 16], got '0'"},
      {"job: j.yaml\nretries:\n  max_attempts: 17\n",
       "trainerd.yaml:3: retries.max_attempts: expected an integer in [1, 16], got '17'"},
      {"job: j.yaml\nparity:\n  updates: -1\n",
       "trainerd.yaml:3: parity.updates: expected an integer in [0, 1000], got '-1'"},
      {"job: j.yaml\nparity:\n  updates: 1001\n",
       "trainerd.yaml:3: parity.updates: expected an integer in [0, 1000], got '1001'"},
      {"job: j.yaml\nparity:\n  updates: three\n",
       "trainerd.yaml:3: parity.updates: expected an integer in [0, 1000], got 'three'"},
      {"job: j.yaml\nparity:\n  updates: 2.5\n",
       "trainerd.yaml:3: parity.updates: expected an integer in [0, 1000], got '2.5'"},
      {"job: j.yaml\nparity:\n  steps: 3\n", "trainerd.yaml:3: parity.steps: unknown key"},
      {"job: j.yaml\nparity: 3\n", "trainerd.yaml:2: parity: expected a mapping"},
      {"job: j.yaml\nregression:\n  eval_loss_tolerance: lots\n",
       "trainerd.yaml:3: regression.eval_loss_tolerance: expected a fraction in [0, 1] such as "
       "0.1 or 10%, got 'lots'"},
      {"job: j.yaml\nregression:\n  gate_confidence: 100%\n",
       "trainerd.yaml:3: regression.gate_confidence: expected a fraction in [0.5, 0.999] such "
       "as 0.1 or 10%, got '100%'"},
      {"job: j.yaml\nregression:\n  slice_tolerances:\n    MIT: 1%\n    GPL-3: 150%\n",
       "trainerd.yaml:5: regression.slice_tolerances.GPL-3: expected a fraction in [0, 1] such "
       "as 0.1 or 10%, got '150%'"},
      {"job: j.yaml\nregression:\n  slice_tolerances: [GPL-3]\n",
       "trainerd.yaml:3: regression.slice_tolerances: expected a mapping of names to fractions, "
       "got a list"},
      {"job: j.yaml\ncost:\n  per_device_hour: -0.1\n",
       "trainerd.yaml:3: cost.per_device_hour: expected a number in [0, 1e+09], got '-0.1'"},
      {"job: j.yaml\ncost:\n  currency: dollars\n",
       "trainerd.yaml:3: cost.currency: expected a three-letter currency code such as USD or "
       "EUR, got 'dollars'"},
      {"job: j.yaml\ncontrol:\n  socket: ''\n",
       "trainerd.yaml:3: control.socket: expected a non-empty path, got ''"},
      {"job: j.yaml\nworker:\n  binary: x\n", "trainerd.yaml:3: worker.binary: unknown key"},
      {"job: j.yaml\nstate_dir: [a]\n",
       "trainerd.yaml:2: state_dir: expected a string, got a list"},
      {"job: j.yaml\noutcomes:\n  metrics: {name: ctr}\n",
       "trainerd.yaml:3: outcomes.metrics: expected a list of mappings"},
      {"job: j.yaml\noutcomes:\n  metrics:\n    - ctr\n",
       "trainerd.yaml:4: outcomes.metrics[0]: expected a mapping"},
      {"job: j.yaml\noutcomes:\n  metrics:\n    - {name: ctr}\n",
       "trainerd.yaml:4: outcomes.metrics[0].better: expected higher or lower, got nothing"},
      {"job: j.yaml\noutcomes:\n  metrics:\n    - {name: ctr, better: up}\n",
       "trainerd.yaml:4: outcomes.metrics[0].better: expected one of"},
      {"job: j.yaml\noutcomes:\n  metrics:\n    - {better: higher}\n",
       "trainerd.yaml:4: outcomes.metrics[0].name: expected the metric's name, got nothing"},
      {"job: j.yaml\noutcomes:\n  metrics:\n    - {name: ctr, better: higher}\n"
       "    - {name: ctr, better: lower}\n",
       "trainerd.yaml:5: outcomes.metrics[1].name: expected a name no other metric has, got "
       "'ctr'"},
      {"job: j.yaml\noutcomes:\n  metrics:\n    - {name: ctr, better: higher, min_count: 0}\n",
       "trainerd.yaml:4: outcomes.metrics[0].min_count: expected an integer in [1, 1000000000], "
       "got '0'"},
      {"job: j.yaml\noutcomes:\n  metrics:\n    - {name: ctr, better: higher, maturity: soon}\n",
       "trainerd.yaml:4: outcomes.metrics[0].maturity: expected a duration"},
      {"job: j.yaml\noutcomes:\n  metrics:\n    - {name: ctr, better: higher, window: 3d}\n",
       "trainerd.yaml:4: outcomes.metrics[0].window: unknown key"},
      {"job: j.yaml\nretention:\n  releases: 0\n",
       "trainerd.yaml:3: retention.releases: expected an integer in [1, 100000], got '0'"},
      {"job: j.yaml\nretention:\n  files: forever\n",
       "trainerd.yaml:3: retention.files: expected a duration"},
      {"job: j.yaml\nretention:\n  logs: 3h\n", "trainerd.yaml:3: retention.logs: unknown key"},
      {"job: j.yaml\noutcomes:\n  check_interval: 0s\n",
       "trainerd.yaml:3: outcomes.check_interval: expected a duration in (0s, 24h]"},
  };
  for (const auto& c : cases) {
    const std::string error = ErrorOf(c.yaml);
    EXPECT_NE(error.find(c.expected), std::string::npos)
        << "yaml:\n"
        << c.yaml << "error:    " << error << "\nexpected: " << c.expected;
  }
}

// Found by tests/fuzz/job_spec_parser_fuzzer in the YAML reader both parsers share: a list or
// a mapping as a key threw YAML::TypedBadConversion out of the parser.
TEST(DaemonConfigTest, AListOrMappingAsAKeyIsAnErrorNotAnException) {
  EXPECT_EQ(ErrorOf("job: j.yaml\n? [a]\n: 1\n"),
            "trainerd.yaml:2: top level: expected a key name, got a list");
  EXPECT_EQ(ErrorOf("job: j.yaml\nschedule:\n  {x: 1}: 2\n"),
            "trainerd.yaml:3: schedule: expected a key name, got a mapping");
}

TEST(DaemonConfigTest, InvalidYamlNamesTheLine) {
  const std::string error = ErrorOf("job: j.yaml\nschedule: [\n");
  EXPECT_NE(error.find("trainerd.yaml:"), std::string::npos) << error;
  EXPECT_NE(error.find("not valid YAML"), std::string::npos) << error;
  EXPECT_NE(ErrorOf("- a\n- b\n").find("expected a YAML mapping"), std::string::npos);
}

TEST(DaemonConfigTest, FileErrorsNameTheFile) {
  testing::TempDir dir;
  const std::string path = dir.Write("trainerd.yaml", "job: j.yaml\nschedule:\n  start: noon\n");
  Result<DaemonConfig> config = ParseDaemonConfigFile(path);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(config.status().message().rfind(path + ":3: schedule.start: expected HH:MM", 0), 0u)
      << config.status().message();
}

TEST(DaemonConfigTest, FileAnchorsRelativePathsAtItsFolder) {
  testing::TempDir dir;
  const std::string path = dir.Write("trainerd.yaml", "job: default.yaml\n");
  Result<DaemonConfig> config = ParseDaemonConfigFile(path);
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->source_path, path);
  EXPECT_EQ(config->job_path, dir.File("default.yaml"));
  EXPECT_EQ(config->state_dir, dir.File("state"));
}

TEST(DaemonConfigTest, MissingFileIsNotFoundNamingThePath) {
  testing::TempDir dir;
  const std::string path = dir.File("absent.yaml");
  Result<DaemonConfig> config = ParseDaemonConfigFile(path);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), Status::Code::kNotFound);
  EXPECT_NE(config.status().message().find(path), std::string::npos) << config.status().message();
}

TEST(DaemonConfigTest, DirectoryIsAnIOError) {
  testing::TempDir dir;
  Result<DaemonConfig> config = ParseDaemonConfigFile(dir.path().string());
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), Status::Code::kIOError);
  EXPECT_NE(config.status().message().find(dir.path().string()), std::string::npos);
}

TEST(DaemonConfigTest, BundledConfigParsesAndItsJobExists) {
  const fs::path source = fs::absolute(SourceDir()).lexically_normal();
  Result<DaemonConfig> config = ParseDaemonConfigFile((source / "configs/trainerd.yaml").string());
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->job_path, (source / "configs/default.yaml").string());
  EXPECT_TRUE(fs::is_regular_file(config->job_path)) << config->job_path;
  Result<JobSpec> job = ParseJobSpecFile(config->job_path);
  EXPECT_TRUE(job.ok()) << job.status().message();
  EXPECT_EQ(config->state_dir, (source / "state/trainerd").string());
  EXPECT_EQ(config->socket_path, (source / "state/trainerd/trainerd.sock").string());
  EXPECT_EQ(config->schedule.start_minute, 90);
  EXPECT_EQ(config->schedule.timezone, "UTC");
  EXPECT_DOUBLE_EQ(config->schedule.window_seconds, 6 * 3600);
  EXPECT_DOUBLE_EQ(config->schedule.deadline_grace_seconds, 120);
  EXPECT_EQ(config->metrics_listen, "127.0.0.1:9464");
  EXPECT_DOUBLE_EQ(config->cost.per_device_hour, 0.35);
  EXPECT_EQ(config->cost.currency, "USD");
  EXPECT_DOUBLE_EQ(config->regression.throughput_tolerance, 0.50);
  EXPECT_DOUBLE_EQ(config->regression.eval_loss_tolerance, 0.02);
  EXPECT_TRUE(config->regression.slice_tolerances.empty());
  EXPECT_DOUBLE_EQ(config->regression.gate_confidence, 0.95);
  EXPECT_DOUBLE_EQ(config->regression.baseline_margin, 0.01);
  EXPECT_DOUBLE_EQ(config->outcomes.confidence, 0.95);
  EXPECT_EQ(config->max_attempts, 4);
  EXPECT_EQ(config->parity_updates, 3);
  EXPECT_EQ(config->worker_path, "");
}

// A group is a property of the host: trainerd checks it right after parsing, before the
// metrics endpoint or anything else starts, and names the line like every config error.
TEST(DaemonConfigTest, AControlGroupThatDoesNotExistIsAnErrorNamingFileLineKeyAndValue) {
  Result<DaemonConfig> config = ParseDaemonConfigText(
      "job: job.yaml\ncontrol:\n  group: no-such-group-xyz\n", "/etc/trainerd/trainerd.yaml");
  ASSERT_TRUE(config.ok()) << config.status().message();
  const Status s = CheckHostNames(*config);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "/etc/trainerd/trainerd.yaml:3: control.group: expected the name of a group in the "
            "group database (getent group), got 'no-such-group-xyz'");
  config->control_group = "root";  // in every Linux group database
  EXPECT_TRUE(CheckHostNames(*config).ok());
  config->control_group = "";
  EXPECT_TRUE(CheckHostNames(*config).ok());
}

TEST(DaemonConfigTest, TheServiceConfigInDeployParses) {
  const char* root = std::getenv("TRAINERD_SOURCE_DIR");
  ASSERT_NE(root, nullptr) << "run through ctest";
  Result<DaemonConfig> config = ParseDaemonConfigFile(std::string(root) + "/deploy/trainerd.yaml");
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->state_dir, "/var/lib/trainerd");
  EXPECT_EQ(config->socket_path, "/run/trainerd/trainerd.sock");
  EXPECT_EQ(config->control_group, "trainerd");
  EXPECT_EQ(config->job_path, "/etc/trainerd/job.yaml");
}

}  // namespace
}  // namespace trainerd::daemon
