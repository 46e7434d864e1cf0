#include "rows.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace trainerd::store::rows {
namespace {

// Every column of `runs` but id, in the order BindRun binds them.
constexpr std::string_view kRunColumns =
    "config_hash, fallback_of, status, created_at, started_at, ended_at, deadline_at, "
    "microbatch, accumulation_steps, checkpoint_blocks, precision, optimizer_state, zero_stage, "
    "output_chunk, step_in_backward, offload_activations, hardware_id, software_id, shapes, seeds, "
    "data_fingerprint, throughput_method, "
    "parameters_bytes, "
    "gradients_bytes, "
    "optimizer_state_bytes, activations_bytes, temporaries_bytes, inputs_bytes, peak_bytes, "
    "samples_per_second, tokens_per_second, mfu, cost_per_sample, final_loss, parity_seconds, "
    "world_size";

std::string RunPlaceholders() {
  const auto columns = std::count(kRunColumns.begin(), kRunColumns.end(), ',') + 1;
  std::string text = "?";
  for (std::ptrdiff_t i = 1; i < columns; ++i) text += ", ?";
  return text;
}

// A stored enum name the schema's CHECK constraints should have made impossible.
template <typename Enum>
Result<Enum> StoredEnum(Result<Enum> parsed) {
  if (!parsed.ok()) {
    return Status::Corruption("run store holds an unexpected value: " + parsed.status().message());
  }
  return parsed;
}

std::string EncodeBlocks(const std::vector<int>& blocks) { return nlohmann::json(blocks).dump(); }

Result<std::vector<int>> DecodeBlocks(const std::string& text) {
  const nlohmann::json json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!json.is_array() ||
      !std::all_of(json.begin(), json.end(), [](const auto& v) { return v.is_number_integer(); })) {
    return Status::Corruption(
        "run store holds checkpoint blocks that are not a list of "
        "integers: " +
        text);
  }
  return json.get<std::vector<int>>();
}

}  // namespace

// --- Config versions and their history -------------------------------------------------

Result<ConfigVersion> ReadConfigVersion(sqlite::Statement& stmt) {
  ConfigVersion version;
  version.hash = stmt.ReadText();
  version.yaml = stmt.ReadText();
  version.first_seen = stmt.ReadDouble();
  Result<ConfigState> state = StoredEnum(ParseConfigState(stmt.ReadText()));
  if (!state.ok()) return state.status();
  version.state = *state;
  return version;
}

void BindConfigStateChange(sqlite::Statement& stmt, const ConfigStateChange& change) {
  stmt.Bind(change.config_hash, ToString(change.state), change.reason, change.at, change.run_id);
}

Result<ConfigStateChange> ReadConfigStateChange(sqlite::Statement& stmt) {
  ConfigStateChange change;
  change.config_hash = stmt.ReadText();
  Result<ConfigState> state = StoredEnum(ParseConfigState(stmt.ReadText()));
  if (!state.ok()) return state.status();
  change.state = *state;
  change.reason = stmt.ReadText();
  change.at = stmt.ReadDouble();
  change.run_id = stmt.ReadOptionalInt64();
  return change;
}

// --- Fingerprints ----------------------------------------------------------------------

void BindHardware(sqlite::Statement& stmt, const HardwareFingerprint& hardware) {
  stmt.Bind(hardware.cpu_model, hardware.cpu_cores, hardware.memory_bytes, hardware.device,
            hardware.device_memory_bytes);
}

void BindHardwareRow(sqlite::Statement& stmt, const HardwareFingerprint& hardware) {
  BindHardware(stmt, hardware);
  stmt.Bind(hardware.isa);
}

void BindSoftware(sqlite::Statement& stmt, const SoftwareFingerprint& software) {
  stmt.Bind(software.trainerd_version, software.libtorch_version, software.blas, software.compiler);
}

// --- Runs ------------------------------------------------------------------------------

const std::string_view kSelectRun =
    "SELECT r.id, r.config_hash, r.fallback_of, r.status, r.created_at, r.started_at, "
    "r.ended_at, r.deadline_at, r.microbatch, r.accumulation_steps, r.checkpoint_blocks, "
    "r.precision, r.optimizer_state, r.zero_stage, r.output_chunk, r.step_in_backward, "
    "r.offload_activations, h.cpu_model, h.cpu_cores, "
    "h.memory_bytes, "
    "h.device, "
    "h.device_memory_bytes, "
    "h.isa, "
    "s.trainerd_version, s.libtorch_version, s.blas, s.compiler, r.shapes, r.seeds, "
    "r.data_fingerprint, r.throughput_method, r.parameters_bytes, r.gradients_bytes, "
    "r.optimizer_state_bytes, r.activations_bytes, r.temporaries_bytes, r.inputs_bytes, "
    "r.peak_bytes, r.samples_per_second, r.tokens_per_second, r.mfu, r.cost_per_sample, "
    "r.final_loss, r.parity_seconds, r.world_size, r.storage_bytes, r.state_dir_bytes, "
    "IFNULL(r.data_quality, '') "
    "FROM runs r JOIN hardware h ON h.id = r.hardware_id JOIN software s ON s.id = "
    "r.software_id";

Result<RunRecord> ReadRun(sqlite::Statement& stmt) {
  RunRecord run;
  run.id = stmt.ReadInt64();
  run.config_hash = stmt.ReadText();
  run.fallback_of = stmt.ReadOptionalInt64();
  Result<RunStatus> status = StoredEnum(ParseRunStatus(stmt.ReadText()));
  if (!status.ok()) return status.status();
  run.status = *status;
  run.created_at = stmt.ReadDouble();
  run.started_at = stmt.ReadOptionalDouble();
  run.ended_at = stmt.ReadOptionalDouble();
  run.deadline_at = stmt.ReadDouble();
  if (stmt.NextIsNull()) {
    stmt.Skip(kPlanColumns);
  } else {
    Result<PlanSpec> plan = ReadPlan(stmt);
    if (!plan.ok()) return plan.status();
    run.plan = *std::move(plan);
  }
  run.hardware.cpu_model = stmt.ReadText();
  run.hardware.cpu_cores = stmt.ReadInt64();
  run.hardware.memory_bytes = stmt.ReadInt64();
  run.hardware.device = stmt.ReadText();
  run.hardware.device_memory_bytes = stmt.ReadInt64();
  run.hardware.isa = stmt.ReadText();
  run.software.trainerd_version = stmt.ReadText();
  run.software.libtorch_version = stmt.ReadText();
  run.software.blas = stmt.ReadText();
  run.software.compiler = stmt.ReadText();
  run.shapes_json = stmt.ReadText();
  run.seeds_json = stmt.ReadText();
  run.data_fingerprint = stmt.ReadText();
  run.throughput_method = stmt.ReadText();
  MemoryByCategory memory;
  memory.parameters = stmt.ReadInt64();
  memory.gradients = stmt.ReadInt64();
  memory.optimizer_state = stmt.ReadInt64();
  memory.activations = stmt.ReadInt64();
  memory.temporaries = stmt.ReadInt64();
  memory.inputs = stmt.ReadInt64();
  // BindRun writes the categories all NULL or none; peak stands for all of them.
  std::optional<std::int64_t> peak = stmt.ReadOptionalInt64();
  if (peak) {
    memory.peak = *peak;
    run.peak_memory = memory;
  }
  run.samples_per_second = stmt.ReadOptionalDouble();
  run.tokens_per_second = stmt.ReadOptionalDouble();
  run.mfu = stmt.ReadOptionalDouble();
  run.cost_per_sample = stmt.ReadOptionalDouble();
  run.final_loss = stmt.ReadOptionalDouble();
  run.parity_seconds = stmt.ReadOptionalDouble();
  run.world_size = stmt.ReadInt64();
  run.storage_bytes = stmt.ReadOptionalInt64();
  run.state_dir_bytes = stmt.ReadOptionalInt64();
  run.data_quality_json = stmt.ReadText();
  return run;
}

const std::string& InsertRunSql() {
  static const std::string sql = "INSERT INTO runs (" + std::string(kRunColumns) + ") VALUES (" +
                                 RunPlaceholders() + ") RETURNING id";
  return sql;
}

const std::string& UpdateRunSql() {
  static const std::string sql = "UPDATE runs SET (" + std::string(kRunColumns) + ") = (" +
                                 RunPlaceholders() + ") WHERE id = ?";
  return sql;
}

void BindRun(sqlite::Statement& stmt, const RunRecord& run, std::int64_t hardware_id,
             std::int64_t software_id) {
  stmt.Bind(run.config_hash, run.fallback_of, ToString(run.status), run.created_at, run.started_at,
            run.ended_at, run.deadline_at);
  if (run.plan) {
    BindPlan(stmt, *run.plan);
  } else {
    for (int column = 0; column < kPlanColumns; ++column) stmt.Bind(std::nullopt);
  }
  stmt.Bind(hardware_id, software_id, run.shapes_json, run.seeds_json, run.data_fingerprint,
            run.throughput_method);
  if (run.peak_memory) {
    const MemoryByCategory& memory = *run.peak_memory;
    stmt.Bind(memory.parameters, memory.gradients, memory.optimizer_state, memory.activations,
              memory.temporaries, memory.inputs, memory.peak);
  } else {
    stmt.Bind(std::nullopt, std::nullopt, std::nullopt, std::nullopt, std::nullopt, std::nullopt,
              std::nullopt);
  }
  stmt.Bind(run.samples_per_second, run.tokens_per_second, run.mfu, run.cost_per_sample,
            run.final_loss, run.parity_seconds, run.world_size);
}

void BindPlan(sqlite::Statement& stmt, const PlanSpec& plan) {
  stmt.Bind(std::int64_t{plan.microbatch}, std::int64_t{plan.accumulation_steps},
            EncodeBlocks(plan.checkpoint_blocks), std::string(ToString(plan.precision)),
            std::string(ToString(plan.optimizer_state)), std::int64_t{plan.zero_stage},
            std::int64_t{plan.output_chunk}, std::int64_t{plan.step_in_backward ? 1 : 0},
            std::int64_t{plan.offload_activations ? 1 : 0});
}

Result<PlanSpec> ReadPlan(sqlite::Statement& stmt) {
  PlanSpec plan;
  plan.microbatch = static_cast<int>(stmt.ReadInt64());
  plan.accumulation_steps = static_cast<int>(stmt.ReadInt64());
  Result<std::vector<int>> blocks = DecodeBlocks(stmt.ReadText());
  if (!blocks.ok()) return blocks.status();
  plan.checkpoint_blocks = *std::move(blocks);
  const std::string precision = stmt.ReadText();
  const std::optional<Precision> parsed = kPrecisionNames.Parse(precision);
  if (!parsed) return Status::Corruption("run store holds an unknown precision: " + precision);
  plan.precision = *parsed;
  const std::string placement = stmt.ReadText();
  const std::optional<StatePlacement> state = kStatePlacementNames.Parse(placement);
  if (!state) {
    return Status::Corruption("run store holds an unknown optimizer state placement: " + placement);
  }
  plan.optimizer_state = *state;
  plan.zero_stage = static_cast<int>(stmt.ReadInt64());
  plan.output_chunk = static_cast<int>(stmt.ReadInt64());
  plan.step_in_backward = stmt.ReadInt64() != 0;
  plan.offload_activations = stmt.ReadInt64() != 0;
  return plan;
}

// --- Per-update metrics and slice evals ------------------------------------------------

void BindUpdateMetric(sqlite::Statement& stmt, std::int64_t run_id, const UpdateMetric& metric) {
  stmt.Bind(run_id, metric.update, metric.loss, metric.learning_rate, metric.grad_norm,
            metric.samples_per_second, metric.live_bytes);
}

UpdateMetric ReadUpdateMetric(sqlite::Statement& stmt) {
  UpdateMetric metric;
  metric.update = stmt.ReadInt64();
  metric.loss = stmt.ReadDouble();
  metric.learning_rate = stmt.ReadDouble();
  metric.grad_norm = stmt.ReadDouble();
  metric.samples_per_second = stmt.ReadDouble();
  metric.live_bytes = stmt.ReadInt64();
  return metric;
}

void BindSliceEval(sqlite::Statement& stmt, std::int64_t run_id, const SliceEval& eval) {
  stmt.Bind(run_id, eval.slice, eval.update, eval.loss, eval.baseline_loss, eval.predictions_json,
            eval.windows_json);
}

SliceEval ReadSliceEval(sqlite::Statement& stmt) {
  SliceEval eval;
  eval.slice = stmt.ReadText();
  eval.update = stmt.ReadInt64();
  eval.loss = stmt.ReadDouble();
  eval.baseline_loss = stmt.ReadOptionalDouble();
  eval.predictions_json = stmt.ReadText();
  eval.windows_json = stmt.ReadText();
  return eval;
}

// --- Events ----------------------------------------------------------------------------

void BindEvent(sqlite::Statement& stmt, const Event& event) {
  stmt.Bind(event.at, event.run_id, event.kind, ToString(event.severity), event.message,
            event.details_json);
}

Result<Event> ReadEvent(sqlite::Statement& stmt) {
  Event event;
  event.id = stmt.ReadInt64();
  event.at = stmt.ReadDouble();
  event.run_id = stmt.ReadOptionalInt64();
  event.kind = stmt.ReadText();
  Result<Severity> severity = StoredEnum(ParseSeverity(stmt.ReadText()));
  if (!severity.ok()) return severity.status();
  event.severity = *severity;
  event.message = stmt.ReadText();
  event.details_json = stmt.ReadText();
  return event;
}

// --- Releases --------------------------------------------------------------------------

void BindRelease(sqlite::Statement& stmt, const Release& release) {
  stmt.Bind(release.run_id, release.artifact_path, release.artifact_hash, release.gate_passed,
            release.gate_details_json, release.created_at);
}

Release ReadRelease(sqlite::Statement& stmt) {
  Release release;
  release.id = stmt.ReadInt64();
  release.run_id = stmt.ReadInt64();
  release.artifact_path = stmt.ReadText();
  release.artifact_hash = stmt.ReadText();
  release.gate_passed = stmt.ReadBool();
  release.gate_details_json = stmt.ReadText();
  release.created_at = stmt.ReadDouble();
  release.current = stmt.ReadBool();
  release.live_at = stmt.ReadOptionalDouble();
  release.previous_release_id = stmt.ReadOptionalInt64();
  release.pinned = stmt.ReadBool();
  release.withdrawn_json = stmt.ReadOptionalText();
  release.files_removed_at = stmt.ReadOptionalDouble();
  return release;
}

// --- Outcomes --------------------------------------------------------------------------

void BindOutcome(sqlite::Statement& stmt, const Outcome& outcome) {
  stmt.Bind(outcome.release_id, outcome.slice, outcome.metric, outcome.at, outcome.value,
            outcome.count);
}

Outcome ReadOutcome(sqlite::Statement& stmt) {
  Outcome outcome;
  outcome.release_id = stmt.ReadInt64();
  outcome.slice = stmt.ReadText();
  outcome.metric = stmt.ReadText();
  outcome.at = stmt.ReadDouble();
  outcome.value = stmt.ReadDouble();
  outcome.count = stmt.ReadInt64();
  return outcome;
}

OutcomeTotal ReadOutcomeTotal(sqlite::Statement& stmt) {
  OutcomeTotal total;
  total.slice = stmt.ReadText();
  total.metric = stmt.ReadText();
  total.value = stmt.ReadDouble();
  total.count = stmt.ReadInt64();
  total.first_at = stmt.ReadDouble();
  total.last_at = stmt.ReadDouble();
  total.lines = stmt.ReadInt64();
  total.sum_of_squares = stmt.ReadDouble();
  return total;
}

}  // namespace trainerd::store::rows
