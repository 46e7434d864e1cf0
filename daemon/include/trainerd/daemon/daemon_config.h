// The daemon's own configuration (trainerd.yaml): which job to train, when the nightly window
// opens and how long it lasts, where state lives, and the policy's tolerances. The job itself
// is a separate job spec file (trainer/job_spec.h). Parsed once at start-up; values, freely
// copyable, no shared state.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "trainerd/common/status.h"

namespace trainerd::daemon {

struct ScheduleConfig {
  int start_minute = 90;         // minutes after local midnight, from "HH:MM" (00:00..23:59)
  std::string timezone = "UTC";  // "UTC", "local", or an IANA name present in /usr/share/zoneinfo
  double window_seconds = 6 * 3600;  // completion window after the start; (0, 24h]
  // The worker gets SIGTERM at deadline - grace and SIGKILL at the deadline; [0, window).
  double deadline_grace_seconds = 120;
};

struct CostConfig {
  double per_device_hour = 0;    // price of one device for one hour, in `currency`; >= 0
  std::string currency = "USD";  // ISO 4217 code, three capital letters
};

struct RegressionConfig {
  double throughput_tolerance = 0.25;  // fraction: samples/s may be this much below the baseline
  // fraction: a slice's eval loss may be this much above the current release's
  double eval_loss_tolerance = 0.02;
  std::map<std::string, double> slice_tolerances;  // per-slice overrides of eval_loss_tolerance
  // The confidence of the gate's one-sided test (docs/daemon.md, "The release gate"): a slice
  // beyond its tolerance holds the model back only when it is beyond it by more than
  // NormalQuantile(gate_confidence) standard errors of the difference (eval_noise.h); [0.5,
  // 0.999]. 0.5 judges the losses as if they had no noise.
  double gate_confidence = 0.95;
  // The release gate refuses a model whose eval loss is not below the simple baseline's on
  // every slice (trainer/evaluation/simple_baseline.h) by this fraction of the baseline's
  // loss: a model that learned only the class frequencies comes within it.
  bool beat_baseline = true;
  double baseline_margin = 0.01;
  // The eval-loss tolerance of `slice`: its override, else eval_loss_tolerance.
  double ToleranceFor(const std::string& slice) const;
};

// An outcome the serving side reports per release (trainerctl outcome) that the daemon
// watches: once the current release and the one before it have each been live `maturity`
// with at least `min_count` outcomes on a slice, a current value worse than the previous by
// more than `tolerance` (relative) rolls the model back (docs/outcomes.md).
struct OutcomeMetricConfig {
  std::string name;
  bool higher_is_better = true;  // better: higher | lower
  double maturity_seconds = 72 * 3600.0;
  std::int64_t min_count = 100;  // >= 1
  double tolerance = 0.02;       // fraction of the previous release's value, [0, 1]
};

struct OutcomesConfig {
  std::vector<OutcomeMetricConfig> metrics;  // none: outcomes are kept and shown, not judged
  std::vector<std::string> slices;           // the slices judged; none: every slice reported
  double check_interval_seconds = 3600;      // how often maturity is looked at; (0, 24h]
  // The confidence of the one-sided test against the noise of two releases' means
  // (outcome_watch.h); [0.5, 0.999]. 0.5 judges the means as if they had no noise.
  double confidence = 0.95;
  // The metric named `name`, or null.
  const OutcomeMetricConfig* Metric(const std::string& name) const;
};

// The input-quality check before anything trains (docs/data-quality.md): tonight's training
// data against the current release's. A breach of any threshold stops the night as
// `data_quality`.
struct DataQualityConfig {
  bool check = true;
  double min_size_ratio = 0.5;       // tonight's training samples / the release's, [0, 1]
  double max_id_divergence = 0.1;    // Jensen-Shannon divergence of the ids' counts, bits
  double max_beyond_vocabulary = 0;  // share of training ids the model cannot predict
  double max_not_finite_rows = 0;    // share of training rows holding NaN or Inf
  double max_column_shift = 4;       // |mean - release's mean| / release's spread, any column
  // |share of the training targets the loss masks learn - the release's|, both masked
  double max_learned_share_shift = 0.1;
};

// What the state directory keeps (docs/daemon.md, "Retention"): applied after each night and
// at start-up. Kept whatever the counts say: the current release, the release it replaced,
// the release a model rollback would pick, and every pinned release.
struct RetentionConfig {
  int releases = 10;                        // the newest releases kept, besides those; >= 1
  double files_seconds = 30 * 24 * 3600.0;  // reports, profile traces and worker logs kept
};

// Relative paths in the YAML are relative to the config file's folder; after parsing every
// path below is absolute and lexically normal (the folder of a relative `origin` is taken
// against the current directory at parse time).
struct DaemonConfig {
  std::string source_path;  // the file read, as given
  std::string job_path;     // the job spec file
  ScheduleConfig schedule;
  std::string state_dir;    // default "<config folder>/state"
  std::string socket_path;  // control socket; default "<state_dir>/trainerd.sock"
  // Groups whose members may use the control socket besides root and the daemon's user
  // ("" = none): control.group's members operate (every command), control.read_group's only
  // read (status, runs, show, report, configs, release show). Their existence is a property
  // of the host, checked by CheckHostNames().
  std::string control_group;
  std::string control_group_where;  // "file:line" of control.group, for errors
  std::string control_read_group;
  std::string control_read_group_where;
  // host:port of the /metrics endpoint (port 1..65535); "" disables it.
  std::string metrics_listen = "127.0.0.1:9464";
  CostConfig cost;
  RegressionConfig regression;
  DataQualityConfig data_quality;
  OutcomesConfig outcomes;
  RetentionConfig retention;
  // Updates of the parity check (trainer-run --parity --parity-updates N) that a plan not yet
  // validated for its config version and hardware passes before it trains; [0, 1000],
  // 0 = no check (`parity.updates`).
  int parity_updates = 3;
  int max_attempts = 4;     // worker attempts per nightly cycle including the first; [1, 16]
  std::string worker_path;  // trainer-run executable; "" = next to the trainerd executable
  std::string database_path() const;  // state_dir + "/trainerd.db"
};

// Errors are InvalidArgument and name file, line and key:
// "trainerd.yaml:4: schedule.start: expected HH:MM (00:00-23:59), got '25:00'".
// A missing file gives NotFound, an unreadable one (directory, permissions) IOError, both
// naming the path.
Result<DaemonConfig> ParseDaemonConfigFile(const std::string& path);
// `origin` names the text in errors and anchors relative paths, as if it were the file read.
Result<DaemonConfig> ParseDaemonConfigText(const std::string& yaml_text, const std::string& origin);

// The group ids of control.group and control.read_group (none for a key not given), from the
// group database; InvalidArgument naming file, line, key and value like the parser's for a
// name that is no group there.
struct ControlGroupIds {
  std::optional<gid_t> operate;
  std::optional<gid_t> read;
};
Result<ControlGroupIds> ResolveControlGroups(const DaemonConfig& config);

// What the config names on this host beyond files (ResolveControlGroups). trainerd checks it
// before starting anything.
Status CheckHostNames(const DaemonConfig& config);

}  // namespace trainerd::daemon
