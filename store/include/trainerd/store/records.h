// The records the run store keeps: config versions and their state history, runs with their
// plan, fingerprints and measurements, per-update metrics, per-slice evals, events,
// releases and their outcomes.
//
// Units everywhere in this header: timestamps are Unix seconds (UTC, fractional, double),
// supplied by the caller so that tests and the daemon can use an injected clock; sizes are
// bytes (int64); rates are per second. JSON fields hold JSON text; the store rejects text
// that is not valid JSON.
//
// Thread safety: plain values, freely copyable, no shared state.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "trainerd/common/status.h"
#include "trainerd/trainer/spec/job_spec.h"  // PlanSpec: the one plan type

namespace trainerd::store {

// Lifecycle of a config version. Every change is kept in its history with a reason.
enum class ConfigState {
  kCandidate,  // seen, not yet proven
  kKnownGood,  // a run finished inside its window with no OOM and no regression
  kBad,        // a run with it failed; the policy falls back away from it
};

enum class RunStatus {
  kScheduled,    // recorded, worker not started
  kRunning,      // worker started
  kSucceeded,    // finished inside the window, release gate aside
  kOom,          // ran out of device memory
  kCrashed,      // worker died for another reason
  kLeak,         // live bytes kept growing between updates
  kDeadline,     // killed at the completion deadline
  kRegressed,    // finished, but eval loss regressed beyond tolerance
  kCancelled,    // cancelled by an operator
  kInterrupted,  // the daemon stopped while the run was running
  // The plan was refused before training: its measured ledger exceeds the usable budget, or
  // it failed the parity check. Always has a plan.
  kRejected,
  // The night's data failed the input-quality check before anything trained (docs/
  // data-quality.md). Has no plan.
  kDataQuality,
};

enum class Severity { kInfo, kWarning, kError };

// Stable names: the text stored in the database and the spelling in JSON and CLI output.
// "candidate", "known-good", "bad"; "scheduled", "running", "succeeded", "oom", "crashed",
// "leak", "deadline", "regressed", "cancelled", "interrupted", "rejected", "data_quality"; "info",
// "warning", "error".
std::string_view ToString(ConfigState state);
std::string_view ToString(RunStatus status);
std::string_view ToString(Severity severity);
// InvalidArgument for a name not listed above.
[[nodiscard]] Result<ConfigState> ParseConfigState(std::string_view name);
[[nodiscard]] Result<RunStatus> ParseRunStatus(std::string_view name);
[[nodiscard]] Result<Severity> ParseSeverity(std::string_view name);

// True for every status except kScheduled and kRunning: the run has ended.
bool IsFinished(RunStatus status);

struct ConfigVersion {
  std::string hash;       // content hash of `yaml`, computed by the caller; the key
  std::string yaml;       // the config text exactly as read
  double first_seen = 0;  // Unix seconds
  ConfigState state = ConfigState::kCandidate;
};

struct ConfigStateChange {
  std::string config_hash;
  ConfigState state = ConfigState::kCandidate;  // the state entered
  std::string reason;                           // for humans: why the state changed
  double at = 0;                                // Unix seconds
  // The run that caused the change, if any.
  std::optional<std::int64_t> run_id = std::nullopt;
};

// Two runs ran on the same machine when every field is equal.
struct HardwareFingerprint {
  std::string cpu_model;                 // e.g. "AMD EPYC 9654 96-Core Processor"
  std::int64_t cpu_cores = 0;            // logical cores
  std::int64_t memory_bytes = 0;         // host memory
  std::string device;                    // e.g. "NVIDIA H200" or "cpu"
  std::int64_t device_memory_bytes = 0;  // device memory; host memory for "cpu"
  // The CPU's widest instruction set ("AVX-512 with bf16", common/cpu_isa.h): describes the
  // row, not part of what identifies it; "" where a row was recorded before schema 6 and
  // not met since.
  std::string isa;

  bool operator==(const HardwareFingerprint&) const = default;
};

struct SoftwareFingerprint {
  std::string trainerd_version;  // e.g. "0.1.0+g1a2b3c4"
  std::string libtorch_version;  // e.g. "2.3.1"
  std::string blas;              // e.g. "OpenBLAS 0.3.21"
  std::string compiler;          // e.g. "GCC 12.2.0"

  bool operator==(const SoftwareFingerprint&) const = default;
};

// Bytes by memory-ledger category at the measured peak of a run.
struct MemoryByCategory {
  std::int64_t parameters = 0;
  std::int64_t gradients = 0;
  std::int64_t optimizer_state = 0;
  std::int64_t activations = 0;  // saved for backward
  std::int64_t temporaries = 0;
  std::int64_t inputs = 0;
  std::int64_t peak = 0;  // measured peak, not the sum of the categories

  bool operator==(const MemoryByCategory&) const = default;
};

// Every category and the peak as (name, bytes), in ledger order. The names are the stable
// spelling in JSON and metric labels: "parameters", "gradients", "optimizer_state",
// "activations", "temporaries", "inputs", "peak".
std::array<std::pair<std::string_view, std::int64_t>, 7> NamedCategories(
    const MemoryByCategory& memory);

// One run of a config version with one plan. Fields marked "measured" stay empty until the
// run has produced them; an empty optional is stored as SQL NULL.
struct RunRecord {
  std::int64_t id = 0;  // assigned by Store::CreateRun, increasing, never reused
  std::string config_hash;
  // The run this one replaced after it failed.
  std::optional<std::int64_t> fallback_of = std::nullopt;
  RunStatus status = RunStatus::kScheduled;
  double created_at = 0;                            // Unix seconds: when the run was scheduled
  std::optional<double> started_at = std::nullopt;  // Unix seconds: when the worker started
  std::optional<double> ended_at = std::nullopt;    // Unix seconds: when the run finished
  double deadline_at = 0;                           // Unix seconds: end of the completion window
  // Empty until the run's plan is chosen (Store::SetRunPlan), then the plan that ran: a run
  // stopped before planning has none. Stored as four NULL columns; every succeeded,
  // regressed, leaking or rejected run has one (the schema checks it).
  std::optional<PlanSpec> plan = std::nullopt;
  HardwareFingerprint hardware;
  SoftwareFingerprint software;
  std::string shapes_json = "{}";  // JSON object: model and input shapes
  std::string seeds_json = "{}";   // JSON object: every seed used, by name
  std::string data_fingerprint;    // exact version of the training data
  std::string throughput_method;   // how samples/s was timed (sync, warm-up excluded)
  std::optional<MemoryByCategory> peak_memory = std::nullopt;  // measured
  std::optional<double> samples_per_second = std::nullopt;     // measured
  std::optional<double> tokens_per_second = std::nullopt;      // measured
  std::optional<double> mfu = std::nullopt;  // measured: model FLOP utilization, 0..1
  // Measured: in the configured cost unit per sample.
  std::optional<double> cost_per_sample = std::nullopt;
  // Measured: training loss of the last update. A NaN loss is stored as NULL and reads
  // back empty; the per-update metrics keep it.
  std::optional<double> final_loss = std::nullopt;
  // Measured: wall seconds of the plan's parity check before training (trainer-run
  // --parity); empty when none ran (a validated plan, the check disabled, a run stopped or
  // rejected before it).
  std::optional<double> parity_seconds = std::nullopt;
  // Processes that trained the job data-parallel (distributed.ranks); samples_per_second and
  // tokens_per_second are the whole job's, a rank's share is them divided by this.
  std::int64_t world_size = 1;
  // Measured after the night's retention pass (Store::SetRunStorage): the bytes the run left in
  // the state directory (its release, report, worker log and profile trace) and the state
  // directory's bytes then; empty until measured.
  std::optional<std::int64_t> storage_bytes = std::nullopt;
  std::optional<std::int64_t> state_dir_bytes = std::nullopt;
  // The input-quality check's figures (Store::SetRunDataQuality; daemon/data_quality.h), JSON;
  // "" when none ran.
  std::string data_quality_json = "";

  bool operator==(const RunRecord&) const = default;
};

// Sampled once per optimizer update, at the same point of every update. NaN values are
// kept: SQLite stores NaN as NULL, and the store reads NULL back as NaN.
struct UpdateMetric {
  std::int64_t update = 0;  // the optimizer update's number (trainerd: 1-based, as the worker
                            // reports it); unique within a run
  double loss = 0;
  double learning_rate = 0;
  double grad_norm = 0;
  double samples_per_second = 0;
  std::int64_t live_bytes = 0;  // device bytes allocated after the update
};

// Eval loss of one data slice at one update; the release gate compares these.
struct SliceEval {
  std::string slice;  // unique with `update` within a run
  std::int64_t update = 0;
  double loss = 0;  // NaN round-trips as for UpdateMetric
  // The simple baseline's loss on the same held-out samples; none without one (a module's
  // own loss, an evaluation recorded before store schema 12).
  std::optional<double> baseline_loss = std::nullopt;
  // The distribution of the model's predictions as the worker reported it (JSON of
  // PredictionDistribution, trainer/spec/worker_protocol.h); "" without one.
  std::string predictions_json = "";
  // The loss of each held-out window as the worker reported it (JSON of WindowLosses,
  // trainer/spec/worker_protocol.h): the evaluation's noise is taken from it; "" without one.
  std::string windows_json = "";
};

struct Event {
  std::int64_t id = 0;                                // assigned by the store, increasing
  double at = 0;                                      // Unix seconds
  std::optional<std::int64_t> run_id = std::nullopt;  // the run it concerns, if any
  std::string kind;  // short machine-readable tag, e.g. "oom_fallback"
  Severity severity = Severity::kInfo;
  std::string message;              // for humans
  std::string details_json = "{}";  // JSON object with the machine-readable details

  bool operator==(const Event&) const = default;
};

// The trained model artifact of a run. At most one release is current at any time.
struct Release {
  std::int64_t id = 0;  // assigned by Store::RecordRelease
  std::int64_t run_id = 0;
  std::string artifact_path;
  std::string artifact_hash;
  bool gate_passed = false;              // the release gate's verdict
  std::string gate_details_json = "{}";  // JSON object: per-slice losses and tolerances
  double created_at = 0;                 // Unix seconds
  bool current = false;                  // maintained by Store::SetCurrentRelease only
  // When it first became current (Unix seconds), and the release current just before then;
  // empty until it goes live (the previous release also for the first release ever).
  std::optional<double> live_at = std::nullopt;
  std::optional<std::int64_t> previous_release_id = std::nullopt;
  // An operator pinned it: its outcomes never roll it back (Store::SetReleasePinned).
  bool pinned = false;
  // Why it was withdrawn, a JSON object (an outcome regression's evidence); empty unless it
  // was. Neither it nor another release of its artifact hash becomes current again.
  std::optional<std::string> withdrawn_json = std::nullopt;
  // When the retention policy removed its files (Unix seconds); empty while they are kept.
  // A release whose files were removed never becomes current again.
  std::optional<double> files_removed_at = std::nullopt;

  bool operator==(const Release&) const = default;
};

// What the serving side measured of a live release's predictions: `value` of `metric` on
// `slice`, the mean over `count` outcomes observed up to `at`. Keyed by release, slice,
// metric and time.
// The bounds of an outcome's value and count: a release's sum of value * count over up to
// 2^63 rows stays finite, so its mean is never inf or NaN.
inline constexpr double kMaxOutcomeValue = 1e15;
inline constexpr std::int64_t kMaxOutcomeCount = 1'000'000'000'000;

struct Outcome {
  std::int64_t release_id = 0;
  std::string slice;
  std::string metric;
  double at = 0;           // Unix seconds
  double value = 0;        // within +-kMaxOutcomeValue
  std::int64_t count = 1;  // in [1, kMaxOutcomeCount]

  bool operator==(const Outcome&) const = default;
};

// A release's outcomes of one slice and metric taken together.
struct OutcomeTotal {
  std::string slice;
  std::string metric;
  double value = 0;        // the count-weighted mean of the outcomes' values
  std::int64_t count = 0;  // their counts' sum
  double first_at = 0;     // the earliest and latest outcome's time
  double last_at = 0;
  // The lines they came in and the sum of count x value^2 over them: the spread of the
  // lines' values around the mean, from which the outcome watch takes its noise.
  std::int64_t lines = 0;
  double sum_of_squares = 0;

  bool operator==(const OutcomeTotal&) const = default;
};

}  // namespace trainerd::store
