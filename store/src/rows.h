// How each record maps to table columns: for every record, the SELECT that reads it with
// the function that decodes one of its rows, and the columns that write it with the
// function that binds them. Each pair sits side by side so the two cannot drift apart.
// Private to the store library.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "sqlite.h"
#include "trainerd/store/records.h"

namespace trainerd::store::rows {

// --- Config versions and their history -------------------------------------------------
inline constexpr std::string_view kSelectConfigVersion =
    "SELECT hash, yaml, first_seen, state FROM config_versions";
[[nodiscard]] Result<ConfigVersion> ReadConfigVersion(sqlite::Statement& stmt);

inline constexpr std::string_view kInsertConfigStateChange =
    "INSERT INTO config_state_history (config_hash, state, reason, at, run_id) "
    "VALUES (?, ?, ?, ?, ?)";
inline constexpr std::string_view kSelectConfigStateChange =
    "SELECT config_hash, state, reason, at, run_id FROM config_state_history";
void BindConfigStateChange(sqlite::Statement& stmt, const ConfigStateChange& change);
[[nodiscard]] Result<ConfigStateChange> ReadConfigStateChange(sqlite::Statement& stmt);

// --- Fingerprints ----------------------------------------------------------------------
// Each returns the id of the matching row, inserting it first when there is none. A hardware
// row takes the instruction set it is met with when it had none (recorded before schema 6).
inline constexpr std::string_view kUpsertHardware =
    "INSERT INTO hardware (cpu_model, cpu_cores, memory_bytes, device, device_memory_bytes, isa) "
    "VALUES (?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (cpu_model, cpu_cores, memory_bytes, device, device_memory_bytes) "
    "DO UPDATE SET isa = CASE WHEN hardware.isa = '' THEN excluded.isa ELSE hardware.isa END "
    "RETURNING id";
inline constexpr std::string_view kUpsertSoftware =
    "INSERT INTO software (trainerd_version, libtorch_version, blas, compiler) "
    "VALUES (?, ?, ?, ?) "
    "ON CONFLICT (trainerd_version, libtorch_version, blas, compiler) "
    "DO UPDATE SET blas = excluded.blas RETURNING id";
// An expression for the id of a hardware row, bound by BindHardware.
inline constexpr std::string_view kHardwareId =
    "(SELECT id FROM hardware WHERE cpu_model = ? AND cpu_cores = ? AND memory_bytes = ? "
    "AND device = ? AND device_memory_bytes = ?)";
void BindHardware(sqlite::Statement& stmt, const HardwareFingerprint& hardware);
// kUpsertHardware's values: BindHardware's and the instruction set.
void BindHardwareRow(sqlite::Statement& stmt, const HardwareFingerprint& hardware);
void BindSoftware(sqlite::Statement& stmt, const SoftwareFingerprint& software);

// --- Runs ------------------------------------------------------------------------------
// Reads runs joined with their fingerprints as `r`, `h` and `s`; append WHERE and ORDER BY.
extern const std::string_view kSelectRun;
[[nodiscard]] Result<RunRecord> ReadRun(sqlite::Statement& stmt);
// INSERT of every column but id, RETURNING id, and UPDATE of the same columns WHERE id = ?;
// both bound by BindRun (then the id, for the UPDATE).
const std::string& InsertRunSql();
const std::string& UpdateRunSql();
void BindRun(sqlite::Statement& stmt, const RunRecord& run, std::int64_t hardware_id,
             std::int64_t software_id);
// The plan columns of a run alone, as `r`; all NULL until the run's plan is chosen.
inline constexpr std::string_view kSelectPlan =
    "SELECT r.microbatch, r.accumulation_steps, r.checkpoint_blocks, r.precision, "
    "r.optimizer_state, r.zero_stage, r.output_chunk, r.step_in_backward, r.offload_activations "
    "FROM runs r";
inline constexpr int kPlanColumns = 9;
// UPDATE of the plan columns WHERE id = ?, bound by BindPlan (then the id).
inline constexpr std::string_view kUpdatePlan =
    "UPDATE runs SET (microbatch, accumulation_steps, checkpoint_blocks, precision, "
    "optimizer_state, zero_stage, output_chunk, step_in_backward, offload_activations) = "
    "(?, ?, ?, ?, ?, ?, ?, ?, ?) WHERE id = ?";
void BindPlan(sqlite::Statement& stmt, const PlanSpec& plan);
// REQUIRES: the plan columns are not NULL.
[[nodiscard]] Result<PlanSpec> ReadPlan(sqlite::Statement& stmt);

// --- Per-update metrics and slice evals ------------------------------------------------
inline constexpr std::string_view kInsertUpdateMetric =
    "INSERT INTO update_metrics (run_id, update_index, loss, learning_rate, grad_norm, "
    "samples_per_second, live_bytes) VALUES (?, ?, ?, ?, ?, ?, ?)";
inline constexpr std::string_view kSelectUpdateMetric =
    "SELECT update_index, loss, learning_rate, grad_norm, samples_per_second, live_bytes "
    "FROM update_metrics";
void BindUpdateMetric(sqlite::Statement& stmt, std::int64_t run_id, const UpdateMetric& metric);
UpdateMetric ReadUpdateMetric(sqlite::Statement& stmt);

inline constexpr std::string_view kInsertSliceEval =
    "INSERT INTO slice_evals (run_id, slice, update_index, loss, baseline_loss, predictions, "
    "windows) VALUES (?, ?, ?, ?, ?, NULLIF(?, ''), NULLIF(?, ''))";
inline constexpr std::string_view kSelectSliceEval =
    "SELECT slice, update_index, loss, baseline_loss, IFNULL(predictions, ''), "
    "IFNULL(windows, '') FROM slice_evals";
void BindSliceEval(sqlite::Statement& stmt, std::int64_t run_id, const SliceEval& eval);
SliceEval ReadSliceEval(sqlite::Statement& stmt);

// --- Events ----------------------------------------------------------------------------
inline constexpr std::string_view kInsertEvent =
    "INSERT INTO events (at, run_id, kind, severity, message, details) "
    "VALUES (?, ?, ?, ?, ?, ?) RETURNING id";
inline constexpr std::string_view kSelectEvent =
    "SELECT id, at, run_id, kind, severity, message, details FROM events";
void BindEvent(sqlite::Statement& stmt, const Event& event);
[[nodiscard]] Result<Event> ReadEvent(sqlite::Statement& stmt);

// --- Releases --------------------------------------------------------------------------
inline constexpr std::string_view kInsertRelease =
    "INSERT INTO releases (run_id, artifact_path, artifact_hash, gate_passed, gate_details, "
    "created_at) VALUES (?, ?, ?, ?, ?, ?) RETURNING id";
inline constexpr std::string_view kSelectRelease =
    "SELECT id, run_id, artifact_path, artifact_hash, gate_passed, gate_details, created_at, "
    "is_current, live_at, previous_release_id, pinned, withdrawn, files_removed_at FROM releases";
void BindRelease(sqlite::Statement& stmt, const Release& release);
Release ReadRelease(sqlite::Statement& stmt);

// --- Outcomes --------------------------------------------------------------------------
inline constexpr std::string_view kInsertOutcome =
    "INSERT INTO outcomes (release_id, slice, metric, at, value, count) VALUES (?, ?, ?, ?, ?, ?)";
inline constexpr std::string_view kSelectOutcome =
    "SELECT release_id, slice, metric, at, value, count FROM outcomes";
inline constexpr std::string_view kSelectOutcomeTotal =
    "SELECT slice, metric, SUM(value * count) / SUM(count), SUM(count), MIN(at), MAX(at), "
    "COUNT(*), SUM(count * value * value) FROM outcomes";
void BindOutcome(sqlite::Statement& stmt, const Outcome& outcome);
Outcome ReadOutcome(sqlite::Statement& stmt);
OutcomeTotal ReadOutcomeTotal(sqlite::Statement& stmt);

}  // namespace trainerd::store::rows
