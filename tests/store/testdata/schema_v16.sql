-- A run store at schema version 16, as written by trainerd before evaluations recorded each
-- held-out window's loss (version 17). Frozen: made once from schema_v15.sql migrated by the
-- version-16 step (run 1's offload_activations 0), then `sqlite3 v16.db .dump`; never edit
-- it to follow later schema changes.
PRAGMA foreign_keys=OFF;
BEGIN TRANSACTION;
CREATE TABLE config_versions (
  hash       TEXT PRIMARY KEY,
  yaml       TEXT NOT NULL,
  first_seen REAL NOT NULL,
  state      TEXT NOT NULL CHECK (state IN ('candidate', 'known-good', 'bad'))
);
INSERT INTO config_versions VALUES('cfg-v1',replace('model: tiny\nupdates: 3\n','\n',char(10)),1700000000.4999999999,'known-good');
INSERT INTO config_versions VALUES('cfg-v2',replace('model: tiny\nupdates: 4\n','\n',char(10)),1700259000.0,'bad');
CREATE TABLE config_state_history (
  id          INTEGER PRIMARY KEY AUTOINCREMENT,
  config_hash TEXT NOT NULL REFERENCES config_versions (hash),
  state       TEXT NOT NULL CHECK (state IN ('candidate', 'known-good', 'bad')),
  reason      TEXT NOT NULL,
  at          REAL NOT NULL,
  run_id      INTEGER REFERENCES runs (id)
);
INSERT INTO config_state_history VALUES(1,'cfg-v1','candidate','first seen',1700000000.4999999999,NULL);
INSERT INTO config_state_history VALUES(2,'cfg-v1','known-good','run 1 succeeded inside its window',1700000400.0,1);
INSERT INTO config_state_history VALUES(3,'cfg-v2','candidate','first seen',1700259000.0,NULL);
INSERT INTO config_state_history VALUES(4,'cfg-v2','bad','run 7 failed (oom)',1700345700.0,7);
CREATE TABLE hardware (
  id                  INTEGER PRIMARY KEY,
  cpu_model           TEXT NOT NULL,
  cpu_cores           INTEGER NOT NULL,
  memory_bytes        INTEGER NOT NULL,
  device              TEXT NOT NULL,
  device_memory_bytes INTEGER NOT NULL, isa TEXT NOT NULL DEFAULT '',
  UNIQUE (cpu_model, cpu_cores, memory_bytes, device, device_memory_bytes)
);
INSERT INTO hardware VALUES(1,'Test CPU',16,137438953472,'Test GPU',85899345920,'');
CREATE TABLE software (
  id               INTEGER PRIMARY KEY,
  trainerd_version TEXT NOT NULL,
  libtorch_version TEXT NOT NULL,
  blas             TEXT NOT NULL,
  compiler         TEXT NOT NULL,
  UNIQUE (trainerd_version, libtorch_version, blas, compiler)
);
INSERT INTO software VALUES(1,'0.1.0','2.1.0','OpenBLAS 0.3.21','GCC 12.2.0');
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
INSERT INTO update_metrics VALUES(1,0,2.5,0.0010000000000000000208,1.5,120.0,10000);
INSERT INTO update_metrics VALUES(1,1,1.75,0.0010000000000000000208,1.25,125.0,10000);
INSERT INTO update_metrics VALUES(1,2,1.25,0.0005000000000000000104,1.0,126.0,10000);
INSERT INTO update_metrics VALUES(6,1,2.0,0.0010000000000000000208,1.25,60.0,9000);
INSERT INTO update_metrics VALUES(6,2,1.5,0.0010000000000000000208,1.0,63.499999999999999999,9000);
CREATE TABLE slice_evals (
  run_id       INTEGER NOT NULL REFERENCES runs (id),
  slice        TEXT NOT NULL,
  update_index INTEGER NOT NULL CHECK (update_index >= 0),
  loss         REAL, baseline_loss REAL, predictions TEXT
  CHECK (predictions IS NULL OR json_valid(predictions)),
  PRIMARY KEY (run_id, update_index, slice)
) WITHOUT ROWID;
INSERT INTO slice_evals VALUES(1,'code',2,1.75,NULL,NULL);
INSERT INTO slice_evals VALUES(1,'en',2,1.5,NULL,NULL);
INSERT INTO slice_evals VALUES(6,'en',2,1.625,2.25,'{"entropy":[1,3],"top1":[3,1],"classes":[]}');
CREATE TABLE events (
  id       INTEGER PRIMARY KEY AUTOINCREMENT,
  at       REAL NOT NULL,
  run_id   INTEGER REFERENCES runs (id),
  kind     TEXT NOT NULL,
  severity TEXT NOT NULL CHECK (severity IN ('info', 'warning', 'error')),
  message  TEXT NOT NULL,
  details  TEXT NOT NULL CHECK (json_valid(details))
);
INSERT INTO events VALUES(1,1700000400.0,1,'run_finished','info','run 1 succeeded','{"updates":3}');
INSERT INTO events VALUES(2,1700086000.0,NULL,'daemon_started','warning','started after an unclean stop','{}');
INSERT INTO events VALUES(3,1700172850.0,3,'plan','info','planner plan 8 x 4, 1 blocks checkpointed, bf16','{"source":"planner","planner":{"microbatch":8,"accumulation_steps":4,"checkpoint_blocks":[1],"precision":"bf16","predicted_duration_seconds":120.0}}');
INSERT INTO events VALUES(4,1700173102.0,4,'plan','info','validated plan 4 x 8, 2 blocks checkpointed, bf16','{"source":"validated","plan":{"microbatch":4,"accumulation_steps":8,"checkpoint_blocks":[0,2],"precision":"bf16"}}');
INSERT INTO events VALUES(5,1700259202.0,6,'plan','info','config plan 2 x 16, 2 blocks checkpointed, fp32','{"source":"config","plan":{"microbatch":2,"accumulation_steps":16,"checkpoint_blocks":[0,1],"precision":"fp32"}}');
INSERT INTO events VALUES(6,1700280000.0,6,'run_deadline','warning','stopped (deadline), worker exited 75','{}');
INSERT INTO events VALUES(7,1700345700.0,7,'worker_error','error','out of memory','{"kind":"oom"}');
CREATE TABLE releases (
  id            INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id        INTEGER NOT NULL REFERENCES runs (id),
  artifact_path TEXT NOT NULL,
  artifact_hash TEXT NOT NULL,
  gate_passed   INTEGER NOT NULL CHECK (gate_passed IN (0, 1)),
  gate_details  TEXT NOT NULL CHECK (json_valid(gate_details)),
  created_at    REAL NOT NULL,
  is_current    INTEGER NOT NULL DEFAULT 0 CHECK (is_current IN (0, 1)), live_at REAL, previous_release_id INTEGER REFERENCES releases (id), pinned INTEGER NOT NULL DEFAULT 0 CHECK (pinned IN (0, 1)), withdrawn TEXT CHECK (withdrawn IS NULL OR json_valid(withdrawn)), files_removed_at REAL,
  CHECK (is_current = 0 OR gate_passed = 1)
);
INSERT INTO releases VALUES(1,1,'/state/releases/run-1.pt','sha256:abc',1,'{"pass":true}',1700000500.0,1,1700000500.0,NULL,0,NULL,NULL);
CREATE TABLE outcomes (
  release_id INTEGER NOT NULL REFERENCES releases (id),
  slice      TEXT NOT NULL,
  metric     TEXT NOT NULL,
  at         REAL NOT NULL,
  value      REAL NOT NULL,
  count      INTEGER NOT NULL CHECK (count >= 1),
  PRIMARY KEY (release_id, slice, metric, at)
) WITHOUT ROWID;
INSERT INTO outcomes VALUES(1,'en','ctr',1700000600.0,0.25,40);
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
  data_quality          TEXT CHECK (data_quality IS NULL OR json_valid(data_quality)), output_chunk INTEGER CHECK (output_chunk IS NULL OR output_chunk >= 0), step_in_backward INTEGER
  CHECK (step_in_backward IS NULL OR step_in_backward IN (0, 1)), offload_activations INTEGER
  CHECK (offload_activations IS NULL OR offload_activations IN (0, 1)),
  -- The plan is all four columns or none.
  CHECK ((microbatch IS NULL) = (accumulation_steps IS NULL) AND
         (microbatch IS NULL) = (checkpoint_blocks IS NULL) AND
         (microbatch IS NULL) = (precision IS NULL)),
  -- A run that trained, or whose plan was refused, had a plan.
  CHECK (microbatch IS NOT NULL OR status NOT IN ('succeeded', 'regressed', 'leak', 'rejected'))
);
INSERT INTO runs VALUES(1,'cfg-v1',NULL,'succeeded',1700000100.0,1700000101.0,1700000400.0,1700021700.0,4,8,'[0,2]','bf16',1,1,'{"seq":128}','{"init":7}','data-abc','sync, 2 warm-up updates excluded',1000,1000,2000,4000,500,64,9000,123.5,15808.0,0.41999999999999998445,0.0010000000000000000208,1.25,NULL,1,'device',0,NULL,NULL,'{"checked": true}',0,0,0);
INSERT INTO runs VALUES(2,'cfg-v1',1,'running',1700086400.0,1700086401.0,NULL,1700108000.0,NULL,NULL,NULL,NULL,1,1,'{}','{}','data-abc','',NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,1,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL);
INSERT INTO runs VALUES(3,'cfg-v1',NULL,'interrupted',1700172800.0,1700172801.0,1700173000.0,1700194400.0,8,4,'[1]','bf16',1,1,'{}','{}','','',NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,1,'device',0,NULL,NULL,NULL,0,0,0);
INSERT INTO runs VALUES(4,'cfg-v1',3,'crashed',1700173100.0,1700173101.0,1700173200.0,1700194400.0,4,8,'[0,2]','bf16',1,1,'{}','{}','','',NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,1,'device',0,NULL,NULL,NULL,0,0,0);
INSERT INTO runs VALUES(5,'cfg-v1',4,'interrupted',1700173300.0,1700173301.0,1700173302.0,1700194400.0,NULL,NULL,NULL,NULL,1,1,'{}','{}','','',NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,1,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL);
INSERT INTO runs VALUES(6,'cfg-v1',5,'deadline',1700259200.0,1700259201.0,1700280000.0,1700280000.0,2,16,'[0,1]','fp32',1,1,'{"seq":128}','{"init":7}','data-abc','sync, 2 warm-up updates excluded',1000,1000,2000,2500,300,32,7000,61.750000000000000001,7904.0,0.20999999999999999222,0.0020000000000000000416,1.5,NULL,1,'device',0,4096,81920,NULL,0,0,0);
INSERT INTO runs VALUES(7,'cfg-v2',NULL,'oom',1700345600.0,1700345601.0,1700345700.0,1700367200.0,16,1,'[]','bf16',1,1,'{}','{}','','',1000,1000,2000,90000,4000,256,98000,NULL,NULL,NULL,NULL,NULL,NULL,1,'device',0,NULL,NULL,NULL,0,0,0);
DELETE FROM sqlite_sequence;
INSERT INTO sqlite_sequence VALUES('config_state_history',4);
INSERT INTO sqlite_sequence VALUES('runs',7);
INSERT INTO sqlite_sequence VALUES('events',7);
INSERT INTO sqlite_sequence VALUES('releases',1);
CREATE INDEX config_state_history_by_config ON config_state_history (config_hash, id);
CREATE INDEX config_state_history_by_state ON config_state_history (state, id);
CREATE INDEX events_by_run ON events (run_id, id);
CREATE UNIQUE INDEX releases_current ON releases (is_current) WHERE is_current = 1;
CREATE INDEX releases_by_run ON releases (run_id);
CREATE INDEX runs_by_status ON runs (status, id);
CREATE INDEX runs_by_hardware ON runs (hardware_id, status, config_hash, id);
COMMIT;
PRAGMA user_version = 16;
PRAGMA application_id = 1414680132;
