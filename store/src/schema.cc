#include "schema.h"

#include <array>
#include <cstdio>
#include <string>
#include <string_view>

#include "trainerd/store/store.h"

namespace trainerd::store {
namespace {

struct Migration {
  int version;           // the schema version after this step
  std::string_view sql;  // DDL run in the step's transaction
};

// The schema's history. A released step never changes: databases in the field already ran
// it. A change is a new step at the end, and kSchemaVersion follows it.
constexpr std::array<Migration, 17> kMigrations = {{
    {1, R"sql(
CREATE TABLE config_versions (
  hash       TEXT PRIMARY KEY,
  yaml       TEXT NOT NULL,
  first_seen REAL NOT NULL,
  state      TEXT NOT NULL CHECK (state IN ('candidate', 'known-good', 'bad'))
);
CREATE TABLE config_state_history (
  id          INTEGER PRIMARY KEY AUTOINCREMENT,
  config_hash TEXT NOT NULL REFERENCES config_versions (hash),
  state       TEXT NOT NULL CHECK (state IN ('candidate', 'known-good', 'bad')),
  reason      TEXT NOT NULL,
  at          REAL NOT NULL,
  run_id      INTEGER REFERENCES runs (id)
);
CREATE INDEX config_state_history_by_config ON config_state_history (config_hash, id);
CREATE INDEX config_state_history_by_state ON config_state_history (state, id);

CREATE TABLE hardware (
  id                  INTEGER PRIMARY KEY,
  cpu_model           TEXT NOT NULL,
  cpu_cores           INTEGER NOT NULL,
  memory_bytes        INTEGER NOT NULL,
  device              TEXT NOT NULL,
  device_memory_bytes INTEGER NOT NULL,
  UNIQUE (cpu_model, cpu_cores, memory_bytes, device, device_memory_bytes)
);
CREATE TABLE software (
  id               INTEGER PRIMARY KEY,
  trainerd_version TEXT NOT NULL,
  libtorch_version TEXT NOT NULL,
  blas             TEXT NOT NULL,
  compiler         TEXT NOT NULL,
  UNIQUE (trainerd_version, libtorch_version, blas, compiler)
);

CREATE TABLE runs (
  id                    INTEGER PRIMARY KEY AUTOINCREMENT,
  config_hash           TEXT NOT NULL REFERENCES config_versions (hash),
  fallback_of           INTEGER REFERENCES runs (id),
  status                TEXT NOT NULL CHECK (status IN ('scheduled', 'running', 'succeeded',
                          'oom', 'crashed', 'leak', 'deadline', 'regressed', 'cancelled',
                          'interrupted')),
  created_at            REAL NOT NULL,
  started_at            REAL,
  ended_at              REAL,
  deadline_at           REAL NOT NULL,
  microbatch            INTEGER NOT NULL CHECK (microbatch > 0),
  accumulation_steps    INTEGER NOT NULL CHECK (accumulation_steps > 0),
  checkpoint_blocks     TEXT NOT NULL CHECK (json_valid(checkpoint_blocks)),
  precision             TEXT NOT NULL,
  hardware_id           INTEGER NOT NULL REFERENCES hardware (id),
  software_id           INTEGER NOT NULL REFERENCES software (id),
  shapes                TEXT NOT NULL CHECK (json_valid(shapes)),
  seeds                 TEXT NOT NULL CHECK (json_valid(seeds)),
  data_fingerprint      TEXT NOT NULL,
  throughput_method     TEXT NOT NULL,
  parameters_bytes      INTEGER,
  gradients_bytes       INTEGER,
  optimizer_state_bytes INTEGER,
  activations_bytes     INTEGER,
  temporaries_bytes     INTEGER,
  inputs_bytes          INTEGER,
  peak_bytes            INTEGER,
  samples_per_second    REAL,
  tokens_per_second     REAL,
  mfu                   REAL,
  cost_per_sample       REAL,
  final_loss            REAL
);
CREATE INDEX runs_by_status ON runs (status, id);
CREATE INDEX runs_by_hardware ON runs (hardware_id, status, config_hash, id);

CREATE TABLE update_metrics (
  run_id             INTEGER NOT NULL REFERENCES runs (id),
  update_index       INTEGER NOT NULL CHECK (update_index >= 0),
  loss               REAL,
  learning_rate      REAL,
  grad_norm          REAL,
  samples_per_second REAL,
  live_bytes         INTEGER NOT NULL,
  PRIMARY KEY (run_id, update_index)
) WITHOUT ROWID;
CREATE TABLE slice_evals (
  run_id       INTEGER NOT NULL REFERENCES runs (id),
  slice        TEXT NOT NULL,
  update_index INTEGER NOT NULL CHECK (update_index >= 0),
  loss         REAL,
  PRIMARY KEY (run_id, update_index, slice)
) WITHOUT ROWID;

CREATE TABLE events (
  id       INTEGER PRIMARY KEY AUTOINCREMENT,
  at       REAL NOT NULL,
  run_id   INTEGER REFERENCES runs (id),
  kind     TEXT NOT NULL,
  severity TEXT NOT NULL CHECK (severity IN ('info', 'warning', 'error')),
  message  TEXT NOT NULL,
  details  TEXT NOT NULL CHECK (json_valid(details))
);
CREATE INDEX events_by_run ON events (run_id, id);
)sql"},
    {2, R"sql(
CREATE TABLE releases (
  id            INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id        INTEGER NOT NULL REFERENCES runs (id),
  artifact_path TEXT NOT NULL,
  artifact_hash TEXT NOT NULL,
  gate_passed   INTEGER NOT NULL CHECK (gate_passed IN (0, 1)),
  gate_details  TEXT NOT NULL CHECK (json_valid(gate_details)),
  created_at    REAL NOT NULL,
  is_current    INTEGER NOT NULL DEFAULT 0 CHECK (is_current IN (0, 1)),
  CHECK (is_current = 0 OR gate_passed = 1)
);
-- At most one row can be current.
CREATE UNIQUE INDEX releases_current ON releases (is_current) WHERE is_current = 1;
CREATE INDEX releases_by_run ON releases (run_id);
)sql"},
    // A run has no plan until it chooses one (version 2 wrote a placeholder "1 x 1 fp32"
    // at creation, which runs interrupted before or during planning kept). SQLite cannot
    // drop NOT NULL, so `runs` is rebuilt: the old table is renamed in legacy mode with
    // foreign keys off (the other tables' references keep naming `runs`; ApplyStep checks
    // them all before committing), copied into the new one and dropped; its AUTOINCREMENT
    // counter carries over. Runs that may have stopped before
    // their plan was stored take the plan of their last `plan` event, or none.
    {3, R"sql(
PRAGMA legacy_alter_table = ON;
ALTER TABLE runs RENAME TO runs_v2;
CREATE TABLE runs (
  id                    INTEGER PRIMARY KEY AUTOINCREMENT,
  config_hash           TEXT NOT NULL REFERENCES config_versions (hash),
  fallback_of           INTEGER REFERENCES runs (id),
  status                TEXT NOT NULL CHECK (status IN ('scheduled', 'running', 'succeeded',
                          'oom', 'crashed', 'leak', 'deadline', 'regressed', 'cancelled',
                          'interrupted')),
  created_at            REAL NOT NULL,
  started_at            REAL,
  ended_at              REAL,
  deadline_at           REAL NOT NULL,
  microbatch            INTEGER CHECK (microbatch > 0),
  accumulation_steps    INTEGER CHECK (accumulation_steps > 0),
  checkpoint_blocks     TEXT CHECK (checkpoint_blocks IS NULL OR json_valid(checkpoint_blocks)),
  precision             TEXT,
  hardware_id           INTEGER NOT NULL REFERENCES hardware (id),
  software_id           INTEGER NOT NULL REFERENCES software (id),
  shapes                TEXT NOT NULL CHECK (json_valid(shapes)),
  seeds                 TEXT NOT NULL CHECK (json_valid(seeds)),
  data_fingerprint      TEXT NOT NULL,
  throughput_method     TEXT NOT NULL,
  parameters_bytes      INTEGER,
  gradients_bytes       INTEGER,
  optimizer_state_bytes INTEGER,
  activations_bytes     INTEGER,
  temporaries_bytes     INTEGER,
  inputs_bytes          INTEGER,
  peak_bytes            INTEGER,
  samples_per_second    REAL,
  tokens_per_second     REAL,
  mfu                   REAL,
  cost_per_sample       REAL,
  final_loss            REAL,
  -- The plan is all four columns or none.
  CHECK ((microbatch IS NULL) = (accumulation_steps IS NULL) AND
         (microbatch IS NULL) = (checkpoint_blocks IS NULL) AND
         (microbatch IS NULL) = (precision IS NULL)),
  -- A run that trained had a plan.
  CHECK (microbatch IS NOT NULL OR status NOT IN ('succeeded', 'regressed', 'leak'))
);
INSERT INTO runs SELECT * FROM runs_v2;
UPDATE runs
   SET (microbatch, accumulation_steps, checkpoint_blocks, precision) = (
       SELECT json_extract(p.plan, '$.microbatch'), json_extract(p.plan, '$.accumulation_steps'),
              json(json_extract(p.plan, '$.checkpoint_blocks')), json_extract(p.plan, '$.precision')
         FROM (SELECT coalesce(json_extract(e.details, '$.plan'),
                               json_extract(e.details, '$.planner')) AS plan
                 FROM events e
                WHERE e.run_id = runs.id AND e.kind = 'plan'
                ORDER BY e.id DESC LIMIT 1) p)
 WHERE status NOT IN ('succeeded', 'regressed', 'leak');
DELETE FROM sqlite_sequence WHERE name = 'runs';
UPDATE sqlite_sequence SET name = 'runs' WHERE name = 'runs_v2';
DROP TABLE runs_v2;
PRAGMA legacy_alter_table = OFF;
CREATE INDEX runs_by_status ON runs (status, id);
CREATE INDEX runs_by_hardware ON runs (hardware_id, status, config_hash, id);
)sql"},
    // A run can be `rejected` (its plan refused before training: a ledger over the usable
    // budget, or a failed parity check), which always happens after its plan was chosen;
    // `parity_seconds` is the wall time of the plan's parity check, NULL when none ran.
    // A new status needs the CHECK constraint rebuilt, so `runs` is rebuilt as in step 3:
    // renamed in legacy mode with foreign keys off, copied into the new table (every old
    // row keeps every value; parity_seconds NULL), its AUTOINCREMENT counter carried over.
    {4, R"sql(
PRAGMA legacy_alter_table = ON;
ALTER TABLE runs RENAME TO runs_v3;
CREATE TABLE runs (
  id                    INTEGER PRIMARY KEY AUTOINCREMENT,
  config_hash           TEXT NOT NULL REFERENCES config_versions (hash),
  fallback_of           INTEGER REFERENCES runs (id),
  status                TEXT NOT NULL CHECK (status IN ('scheduled', 'running', 'succeeded',
                          'oom', 'crashed', 'leak', 'deadline', 'regressed', 'cancelled',
                          'interrupted', 'rejected')),
  created_at            REAL NOT NULL,
  started_at            REAL,
  ended_at              REAL,
  deadline_at           REAL NOT NULL,
  microbatch            INTEGER CHECK (microbatch > 0),
  accumulation_steps    INTEGER CHECK (accumulation_steps > 0),
  checkpoint_blocks     TEXT CHECK (checkpoint_blocks IS NULL OR json_valid(checkpoint_blocks)),
  precision             TEXT,
  hardware_id           INTEGER NOT NULL REFERENCES hardware (id),
  software_id           INTEGER NOT NULL REFERENCES software (id),
  shapes                TEXT NOT NULL CHECK (json_valid(shapes)),
  seeds                 TEXT NOT NULL CHECK (json_valid(seeds)),
  data_fingerprint      TEXT NOT NULL,
  throughput_method     TEXT NOT NULL,
  parameters_bytes      INTEGER,
  gradients_bytes       INTEGER,
  optimizer_state_bytes INTEGER,
  activations_bytes     INTEGER,
  temporaries_bytes     INTEGER,
  inputs_bytes          INTEGER,
  peak_bytes            INTEGER,
  samples_per_second    REAL,
  tokens_per_second     REAL,
  mfu                   REAL,
  cost_per_sample       REAL,
  final_loss            REAL,
  parity_seconds        REAL,
  -- The plan is all four columns or none.
  CHECK ((microbatch IS NULL) = (accumulation_steps IS NULL) AND
         (microbatch IS NULL) = (checkpoint_blocks IS NULL) AND
         (microbatch IS NULL) = (precision IS NULL)),
  -- A run that trained, or whose plan was refused, had a plan.
  CHECK (microbatch IS NOT NULL OR status NOT IN ('succeeded', 'regressed', 'leak', 'rejected'))
);
INSERT INTO runs (id, config_hash, fallback_of, status, created_at, started_at, ended_at,
                  deadline_at, microbatch, accumulation_steps, checkpoint_blocks, precision,
                  hardware_id, software_id, shapes, seeds, data_fingerprint, throughput_method,
                  parameters_bytes, gradients_bytes, optimizer_state_bytes, activations_bytes,
                  temporaries_bytes, inputs_bytes, peak_bytes, samples_per_second,
                  tokens_per_second, mfu, cost_per_sample, final_loss)
SELECT id, config_hash, fallback_of, status, created_at, started_at, ended_at, deadline_at,
       microbatch, accumulation_steps, checkpoint_blocks, precision, hardware_id, software_id,
       shapes, seeds, data_fingerprint, throughput_method, parameters_bytes, gradients_bytes,
       optimizer_state_bytes, activations_bytes, temporaries_bytes, inputs_bytes, peak_bytes,
       samples_per_second, tokens_per_second, mfu, cost_per_sample, final_loss
  FROM runs_v3;
DELETE FROM sqlite_sequence WHERE name = 'runs';
UPDATE sqlite_sequence SET name = 'runs' WHERE name = 'runs_v3';
DROP TABLE runs_v3;
PRAGMA legacy_alter_table = OFF;
CREATE INDEX runs_by_status ON runs (status, id);
CREATE INDEX runs_by_hardware ON runs (hardware_id, status, config_hash, id);
)sql"},
    {5, R"sql(
ALTER TABLE runs ADD COLUMN world_size INTEGER NOT NULL DEFAULT 1 CHECK (world_size >= 1);
)sql"},
    {6, R"sql(
ALTER TABLE hardware ADD COLUMN isa TEXT NOT NULL DEFAULT '';
)sql"},
    // Where the plan kept the optimizer state: a fifth plan column, 'device' for every run
    // recorded before plans could keep it on the host.
    {7, R"sql(
ALTER TABLE runs ADD COLUMN optimizer_state TEXT
  CHECK (optimizer_state IS NULL OR optimizer_state IN ('device', 'host'));
UPDATE runs SET optimizer_state = 'device' WHERE microbatch IS NOT NULL;
)sql"},
    // The plan's ZeRO stage over the data-parallel ranks: a sixth plan column, 0 for every run
    // recorded before plans could shard the model's state.
    {8, R"sql(
ALTER TABLE runs ADD COLUMN zero_stage INTEGER CHECK (zero_stage IS NULL OR zero_stage IN (0, 1, 2));
UPDATE runs SET zero_stage = 0 WHERE microbatch IS NOT NULL;
)sql"},
    // Outcomes per release, and the releases' life: when each went live and after which
    // (releases before this version went live when made, after the gate-passed one before),
    // pinned by an operator, withdrawn after their outcomes regressed.
    {9, R"sql(
ALTER TABLE releases ADD COLUMN live_at REAL;
ALTER TABLE releases ADD COLUMN previous_release_id INTEGER REFERENCES releases (id);
ALTER TABLE releases ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0 CHECK (pinned IN (0, 1));
ALTER TABLE releases ADD COLUMN withdrawn TEXT CHECK (withdrawn IS NULL OR json_valid(withdrawn));
UPDATE releases SET live_at = created_at,
  previous_release_id = (SELECT MAX(p.id) FROM releases p WHERE p.gate_passed = 1 AND p.id < releases.id)
  WHERE gate_passed = 1;
CREATE TABLE outcomes (
  release_id INTEGER NOT NULL REFERENCES releases (id),
  slice      TEXT NOT NULL,
  metric     TEXT NOT NULL,
  at         REAL NOT NULL,
  value      REAL NOT NULL,
  count      INTEGER NOT NULL CHECK (count >= 1),
  PRIMARY KEY (release_id, slice, metric, at)
) WITHOUT ROWID;
)sql"},
    // When the retention policy removed a release's files.
    {10, R"sql(
ALTER TABLE releases ADD COLUMN files_removed_at REAL;
)sql"},
    // What a run left in the state directory, and the directory's bytes, after its night's
    // retention pass.
    {11, R"sql(
ALTER TABLE runs ADD COLUMN storage_bytes INTEGER CHECK (storage_bytes IS NULL OR storage_bytes >= 0);
ALTER TABLE runs ADD COLUMN state_dir_bytes INTEGER
  CHECK (state_dir_bytes IS NULL OR state_dir_bytes >= 0);
)sql"},
    // What an evaluation adds to the loss: the simple baseline's loss on the same held-out
    // samples, and the distribution of the model's predictions (JSON); NULL for evaluations
    // recorded before.
    {12, R"sql(
ALTER TABLE slice_evals ADD COLUMN baseline_loss REAL;
ALTER TABLE slice_evals ADD COLUMN predictions TEXT
  CHECK (predictions IS NULL OR json_valid(predictions));
)sql"},
    // A run can be `data_quality` (its night's data failed the input-quality check before
    // anything trained), and records the check's figures (`data_quality`, JSON; NULL for runs
    // before this version or without a check). The new status rebuilds `runs` as in step 4,
    // every column since carried over.
    {13, R"sql(
PRAGMA legacy_alter_table = ON;
ALTER TABLE runs RENAME TO runs_v12;
CREATE TABLE runs (
  id                    INTEGER PRIMARY KEY AUTOINCREMENT,
  config_hash           TEXT NOT NULL REFERENCES config_versions (hash),
  fallback_of           INTEGER REFERENCES runs (id),
  status                TEXT NOT NULL CHECK (status IN ('scheduled', 'running', 'succeeded',
                          'oom', 'crashed', 'leak', 'deadline', 'regressed', 'cancelled',
                          'interrupted', 'rejected', 'data_quality')),
  created_at            REAL NOT NULL,
  started_at            REAL,
  ended_at              REAL,
  deadline_at           REAL NOT NULL,
  microbatch            INTEGER CHECK (microbatch > 0),
  accumulation_steps    INTEGER CHECK (accumulation_steps > 0),
  checkpoint_blocks     TEXT CHECK (checkpoint_blocks IS NULL OR json_valid(checkpoint_blocks)),
  precision             TEXT,
  hardware_id           INTEGER NOT NULL REFERENCES hardware (id),
  software_id           INTEGER NOT NULL REFERENCES software (id),
  shapes                TEXT NOT NULL CHECK (json_valid(shapes)),
  seeds                 TEXT NOT NULL CHECK (json_valid(seeds)),
  data_fingerprint      TEXT NOT NULL,
  throughput_method     TEXT NOT NULL,
  parameters_bytes      INTEGER,
  gradients_bytes       INTEGER,
  optimizer_state_bytes INTEGER,
  activations_bytes     INTEGER,
  temporaries_bytes     INTEGER,
  inputs_bytes          INTEGER,
  peak_bytes            INTEGER,
  samples_per_second    REAL,
  tokens_per_second     REAL,
  mfu                   REAL,
  cost_per_sample       REAL,
  final_loss            REAL,
  parity_seconds        REAL,
  world_size            INTEGER NOT NULL DEFAULT 1 CHECK (world_size >= 1),
  optimizer_state       TEXT CHECK (optimizer_state IS NULL OR optimizer_state IN ('device', 'host')),
  zero_stage            INTEGER CHECK (zero_stage IS NULL OR zero_stage IN (0, 1, 2)),
  storage_bytes         INTEGER CHECK (storage_bytes IS NULL OR storage_bytes >= 0),
  state_dir_bytes       INTEGER CHECK (state_dir_bytes IS NULL OR state_dir_bytes >= 0),
  data_quality          TEXT CHECK (data_quality IS NULL OR json_valid(data_quality)),
  -- The plan is all four columns or none.
  CHECK ((microbatch IS NULL) = (accumulation_steps IS NULL) AND
         (microbatch IS NULL) = (checkpoint_blocks IS NULL) AND
         (microbatch IS NULL) = (precision IS NULL)),
  -- A run that trained, or whose plan was refused, had a plan.
  CHECK (microbatch IS NOT NULL OR status NOT IN ('succeeded', 'regressed', 'leak', 'rejected'))
);
INSERT INTO runs (id, config_hash, fallback_of, status, created_at, started_at, ended_at,
                  deadline_at, microbatch, accumulation_steps, checkpoint_blocks, precision,
                  hardware_id, software_id, shapes, seeds, data_fingerprint, throughput_method,
                  parameters_bytes, gradients_bytes, optimizer_state_bytes, activations_bytes,
                  temporaries_bytes, inputs_bytes, peak_bytes, samples_per_second,
                  tokens_per_second, mfu, cost_per_sample, final_loss, parity_seconds,
                  world_size, optimizer_state, zero_stage, storage_bytes, state_dir_bytes)
SELECT id, config_hash, fallback_of, status, created_at, started_at, ended_at, deadline_at,
       microbatch, accumulation_steps, checkpoint_blocks, precision, hardware_id, software_id,
       shapes, seeds, data_fingerprint, throughput_method, parameters_bytes, gradients_bytes,
       optimizer_state_bytes, activations_bytes, temporaries_bytes, inputs_bytes, peak_bytes,
       samples_per_second, tokens_per_second, mfu, cost_per_sample, final_loss, parity_seconds,
       world_size, optimizer_state, zero_stage, storage_bytes, state_dir_bytes
  FROM runs_v12;
DELETE FROM sqlite_sequence WHERE name = 'runs';
UPDATE sqlite_sequence SET name = 'runs' WHERE name = 'runs_v12';
DROP TABLE runs_v12;
PRAGMA legacy_alter_table = OFF;
CREATE INDEX runs_by_status ON runs (status, id);
CREATE INDEX runs_by_hardware ON runs (hardware_id, status, config_hash, id);
)sql"},
    // The plan's output chunk (PlanSpec::output_chunk): a seventh plan column, 0 for every run
    // recorded before the output layer's loss could be taken in chunks.
    {14, R"sql(
ALTER TABLE runs ADD COLUMN output_chunk INTEGER CHECK (output_chunk IS NULL OR output_chunk >= 0);
UPDATE runs SET output_chunk = 0 WHERE microbatch IS NOT NULL;
)sql"},
    // Whether the plan took the optimizer step inside the backward (PlanSpec::step_in_backward):
    // an eighth plan column, 0 for every run recorded before it could.
    {15, R"sql(
ALTER TABLE runs ADD COLUMN step_in_backward INTEGER
  CHECK (step_in_backward IS NULL OR step_in_backward IN (0, 1));
UPDATE runs SET step_in_backward = 0 WHERE microbatch IS NOT NULL;
)sql"},
    // Whether the plan kept the blocks' activations in host memory
    // (PlanSpec::offload_activations): a ninth plan column, 0 for every run recorded before.
    {16, R"sql(
ALTER TABLE runs ADD COLUMN offload_activations INTEGER
  CHECK (offload_activations IS NULL OR offload_activations IN (0, 1));
UPDATE runs SET offload_activations = 0 WHERE microbatch IS NOT NULL;
)sql"},
    // The loss of each held-out window (JSON of WindowLosses, trainer/spec/worker_protocol.h),
    // from which the release gate takes the evaluation's noise; NULL for evaluations recorded
    // before, which the gate judges without it.
    {17, R"sql(
ALTER TABLE slice_evals ADD COLUMN windows TEXT CHECK (windows IS NULL OR json_valid(windows));
)sql"},
}};

static_assert(kMigrations.size() == kSchemaVersion, "kSchemaVersion is the last migration");

// quick_check's heading before the problems it found.
constexpr std::string_view kQuickCheckPrefix = "*** in database main ***\n";

std::string Hex(std::int64_t value) {
  char text[32];
  std::snprintf(text, sizeof text, "0x%08llx", static_cast<unsigned long long>(value));
  return text;
}

// Runs one step in its transaction with foreign-key enforcement off, as SQLite's procedure
// for rebuilding a table requires (the pragma is a no-op inside a transaction), and commits
// only when every foreign key still holds.
Status ApplyStep(sqlite::Connection& db, const Migration& step) {
  if (Status off = db.Exec("PRAGMA foreign_keys = OFF;"); !off.ok()) return off;
  Status status = [&]() -> Status {
    Result<sqlite::Transaction> transaction = sqlite::Transaction::Begin(db);
    if (!transaction.ok()) return transaction.status();
    // Read again under the write lock: another process may have migrated meanwhile.
    Result<std::int64_t> version = db.QueryInt64("PRAGMA user_version");
    if (!version.ok()) return version.status();
    if (*version >= step.version) return Status::Ok();
    Status ddl = db.Exec(std::string(step.sql) +
                         "\nPRAGMA application_id = " + std::to_string(kApplicationId) +
                         ";\nPRAGMA user_version = " + std::to_string(step.version) + ";");
    if (!ddl.ok()) return ddl;
    Result<std::int64_t> broken = db.QueryInt64("SELECT count(*) FROM pragma_foreign_key_check");
    if (!broken.ok()) return broken.status();
    if (*broken != 0) {
      return Status::Corruption("run store '" + db.path() + "': migration to schema version " +
                                std::to_string(step.version) + " would leave " +
                                std::to_string(*broken) +
                                " broken foreign key(s); the file was not changed");
    }
    return transaction->Commit();
  }();
  Status on = db.Exec("PRAGMA foreign_keys = ON;");
  return status.ok() ? on : status;
}

}  // namespace

Result<int> ReadSchemaVersion(sqlite::Connection& db) {
  // Reading sqlite_schema parses the whole schema, which is where a damaged file shows.
  Result<std::int64_t> objects = db.QueryInt64("SELECT count(*) FROM sqlite_schema");
  if (!objects.ok()) {
    if (objects.status().code() != Status::Code::kCorruption) return objects.status();
    return Status::Corruption("'" + db.path() +
                              "' is not an SQLite database, or is damaged; the file was not "
                              "changed (" +
                              objects.status().message() + ")");
  }
  Result<std::int64_t> application_id = db.QueryInt64("PRAGMA application_id");
  if (!application_id.ok()) return application_id.status();
  Result<std::int64_t> version = db.QueryInt64("PRAGMA user_version");
  if (!version.ok()) return version.status();

  if (*application_id == kApplicationId) {
    if (*version > kSchemaVersion) {
      return Status::FailedPrecondition(
          "run store '" + db.path() + "' has schema version " + std::to_string(*version) +
          ", written by a newer trainerd; this build reads up to version " +
          std::to_string(kSchemaVersion) + ". Upgrade trainerd; the file was not changed");
    }
    return static_cast<int>(*version);
  }
  if (*application_id == 0 && *version == 0 && *objects == 0) return 0;
  return Status::InvalidArgument("'" + db.path() +
                                 "' is an SQLite database but not a trainerd run store "
                                 "(application_id " +
                                 Hex(*application_id) + ", " + std::to_string(*objects) +
                                 " schema objects); the file was not changed");
}

Status CheckIntegrity(sqlite::Connection& db) {
  Result<std::string> verdict = db.QueryText("PRAGMA quick_check(1)");
  if (!verdict.ok()) return verdict.status();
  if (*verdict != "ok") {
    std::string problem = *verdict;
    if (problem.starts_with(kQuickCheckPrefix)) problem.erase(0, kQuickCheckPrefix.size());
    return Status::Corruption("run store '" + db.path() + "' is damaged: " + problem);
  }
  return Status::Ok();
}

Status Migrate(sqlite::Connection& db) {
  Result<std::int64_t> version = db.QueryInt64("PRAGMA user_version");
  if (!version.ok()) return version.status();
  for (const Migration& step : kMigrations) {
    if (step.version <= *version) continue;
    Status status = ApplyStep(db, step);
    if (!status.ok()) return status;
  }
  return Status::Ok();
}

}  // namespace trainerd::store
