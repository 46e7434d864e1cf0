// Migrations, schema versions and recognition of files that are not trainerd run stores,
// through Store::Open and Store::OpenReadOnly.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <random>

#include "../support/killed_child.h"
#include "test_util.h"
#include "trainerd/store/store.h"

namespace trainerd::store {
namespace {

using testing::IsOk;
using testing::RawDb;
using testing::ReadBytes;
using testing::TempDir;
using testing::WriteBytes;

std::string FixturePath(int version) {
  return std::string(TRAINERD_STORE_TESTDATA_DIR) + "/schema_v" + std::to_string(version) + ".sql";
}

// Writes a database at an earlier schema version from its frozen fixture.
void WriteFixture(int version, const std::string& path) {
  RawDb(path).Exec(ReadBytes(FixturePath(version)));
}

std::string SchemaOf(const std::string& path) {
  return RawDb(path).Query("SELECT type, name, tbl_name, sql FROM sqlite_schema ORDER BY name");
}

// Expects Open and OpenReadOnly to fail on `path` with `code`, naming it, and to leave every
// byte of it as it was.
void ExpectRefused(const std::string& path, Status::Code code) {
  const std::string before = ReadBytes(path);
  for (bool read_only : {false, true}) {
    SCOPED_TRACE(read_only ? "OpenReadOnly" : "Open");
    Result<std::unique_ptr<Store>> store =
        read_only ? Store::OpenReadOnly(path) : Store::Open(path);
    ASSERT_FALSE(store.ok());
    EXPECT_EQ(store.status().code(), code) << store.status().message();
    EXPECT_NE(store.status().message().find(path), std::string::npos) << store.status().message();
  }
  EXPECT_EQ(ReadBytes(path), before);
}

TEST(SchemaTest, MigratesEveryEarlierVersionKeepingItsData) {
  for (int version = 1; version < kSchemaVersion; ++version) {
    SCOPED_TRACE("from schema version " + std::to_string(version));
    ASSERT_TRUE(std::filesystem::exists(FixturePath(version)))
        << "every released schema version needs a frozen fixture";
    TempDir dir;
    const std::string path = dir.File("old.db");
    WriteFixture(version, path);
    Result<std::unique_ptr<Store>> store = Store::Open(path);
    ASSERT_TRUE(IsOk(store));
    EXPECT_EQ(RawDb(path).Query("PRAGMA user_version"), std::to_string(kSchemaVersion));

    // The migrated schema is exactly the schema of a new store.
    const std::string fresh = dir.File("fresh.db");
    ASSERT_TRUE(IsOk(Store::Open(fresh)));
    EXPECT_EQ(SchemaOf(path), SchemaOf(fresh));

    // Every fixture holds config 'cfg-v1', a succeeded run 1 and a running run 2.
    Store& migrated = **store;
    Result<RunRecord> run = migrated.GetRun(1);
    ASSERT_TRUE(IsOk(run));
    EXPECT_EQ(run->status, RunStatus::kSucceeded);
    EXPECT_EQ(run->plan, (PlanSpec{4, 8, {0, 2}, Precision::kBf16}));
    // Run 2 has no plan event: the plan it was created with may be a placeholder.
    EXPECT_EQ(migrated.GetRun(2)->plan, std::nullopt);
    EXPECT_EQ(run->hardware.device_memory_bytes, std::int64_t{80} << 30);
    EXPECT_EQ(run->hardware.isa, "") << "not known until the hardware is met again";
    EXPECT_EQ(run->peak_memory->peak, 9000);
    EXPECT_EQ(run->final_loss, 1.25);
    EXPECT_EQ(migrated.GetMetrics(1)->size(), 3u);
    EXPECT_EQ(migrated.GetSliceEvals(1)->size(), 2u);
    EXPECT_EQ(migrated.GetSliceEvals(1)->front().baseline_loss, std::nullopt)
        << "evaluations before version 12 had no baseline";
    EXPECT_EQ(migrated.GetSliceEvals(1)->front().windows_json, "")
        << "nor, before version 17, the loss of each window";
    EXPECT_EQ(migrated.GetRunEvents(1)->size(), 1u);
    const std::size_t events = version >= 3 ? 7u : version == 2 ? 4u : 2u;
    EXPECT_EQ(migrated.ListRecentEvents(10)->size(), events);
    EXPECT_EQ(migrated.GetRun(2)->fallback_of, 1);
    EXPECT_EQ(migrated.LastKnownGoodConfig()->value().hash, "cfg-v1");
    EXPECT_EQ(migrated.GetConfigHistory("cfg-v1")->size(), 2u);

    if (version >= 2) {
      // Plans that version 2 kept as placeholders: from the run's last plan event, or none.
      EXPECT_EQ(migrated.GetRun(3)->plan, (PlanSpec{8, 4, {1}, Precision::kBf16}));
      EXPECT_EQ(migrated.GetRun(4)->plan, (PlanSpec{4, 8, {0, 2}, Precision::kBf16}));
      EXPECT_EQ(migrated.GetRun(5)->plan, std::nullopt);
      EXPECT_EQ(migrated.GetRun(5)->status, RunStatus::kInterrupted);
      EXPECT_EQ(migrated.CurrentRelease()->value().run_id, 1);
      // Before version 9 a gate-passed release went live when it was made.
      EXPECT_EQ(migrated.CurrentRelease()->value().live_at,
                migrated.CurrentRelease()->value().created_at);
      EXPECT_FALSE(migrated.CurrentRelease()->value().withdrawn_json.has_value());
      EXPECT_FALSE(migrated.CurrentRelease()->value().files_removed_at.has_value());
    }
    if (version >= 9) {  // the fixture's outcome
      EXPECT_EQ(migrated.GetOutcomeTotals(1, 2e9)->size(), 1u);
    }

    // No run of an earlier version ran a parity check the store knows of.
    const Result<std::vector<RunRecord>> every_run = migrated.ListRecentRuns(100);
    ASSERT_TRUE(IsOk(every_run));
    for (const RunRecord& any : *every_run) {
      EXPECT_EQ(any.parity_seconds, std::nullopt) << "run " << any.id;
      EXPECT_EQ(any.world_size, 1) << "run " << any.id;  // one process before version 5
    }

    // And it works as a current store: new ids follow the old ones, releases exist, a run
    // can be rejected with the time of its parity check.
    RunRecord next = *run;
    next.status = RunStatus::kScheduled;
    Result<std::int64_t> id = migrated.CreateRun(next);
    ASSERT_TRUE(IsOk(id));
    EXPECT_EQ(*id, version >= 3 ? 8 : version == 2 ? 6 : 3);
    next.id = *id;
    next.status = RunStatus::kRejected;
    next.parity_seconds = 2.5;
    next.world_size = 4;
    ASSERT_TRUE(IsOk(migrated.FinishRun(next, {}, {}, {})));
    EXPECT_EQ(migrated.GetRun(*id)->parity_seconds, 2.5);
    EXPECT_EQ(migrated.GetRun(*id)->world_size, 4);
    Result<std::int64_t> release = migrated.RecordRelease({0, 1, "/m.pt", "sha256:m", true});
    ASSERT_TRUE(IsOk(release));
    EXPECT_TRUE(IsOk(migrated.SetCurrentRelease(*release, 100)));
  }
}

// A migration killed anywhere: the step it was in rolls back with its transaction, and the
// next open migrates from where the file is, ending at the data and schema of an
// uninterrupted migration.
TEST(SchemaTest, AMigrationKilledAtRandomPointsIsFinishedWholeByTheNextOpen) {
  TempDir dir;
  const std::string fresh = dir.File("fresh.db");
  ASSERT_TRUE(IsOk(Store::Open(fresh)));
  std::mt19937 random(20261206);
  std::uniform_int_distribution<int> delay_us(0, 20000);
  for (int trial = 0; trial < 25; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial));
    const std::string path = dir.File("old-" + std::to_string(trial) + ".db");
    WriteFixture(1, path);
    const trainerd::testing::ChildEnd end = trainerd::testing::RunAndKillAfter(
        [&] { return Store::Open(path).ok(); }, std::chrono::microseconds(delay_us(random)));
    ASSERT_FALSE(end.failed) << "the migration failed";
    const std::string reached = RawDb(path).Query("PRAGMA user_version");
    Result<std::unique_ptr<Store>> store = Store::Open(path);
    ASSERT_TRUE(IsOk(store)) << "killed at schema version " << reached;
    EXPECT_EQ(RawDb(path).Query("PRAGMA user_version"), std::to_string(kSchemaVersion));
    EXPECT_EQ(SchemaOf(path), SchemaOf(fresh));
    EXPECT_EQ((*store)->GetRun(1)->status, RunStatus::kSucceeded);
    EXPECT_EQ((*store)->GetMetrics(1)->size(), 3u);
    EXPECT_EQ((*store)->GetRun(2)->fallback_of, 1);
  }
}

// A step that would leave a broken foreign key rolls back whole: the store is refused with
// the reason and the file keeps its schema and rows (a row an older trainerd left dangling).
TEST(SchemaTest, AMigrationStepThatBreaksAForeignKeyRollsBackAndChangesNothing) {
  TempDir dir;
  const std::string path = dir.File("old.db");
  WriteFixture(kSchemaVersion - 1, path);
  RawDb(path).Exec(
      "PRAGMA foreign_keys = OFF; INSERT INTO events VALUES(99, 1700000500.0, 4242, 'orphan', "
      "'info', 'an event of a run that is gone', '{}');");
  const std::string schema_before = SchemaOf(path);
  const std::string events_before = RawDb(path).Query("SELECT * FROM events ORDER BY id");
  Result<std::unique_ptr<Store>> store = Store::Open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), Status::Code::kCorruption);
  EXPECT_NE(store.status().message().find("migration to schema version " +
                                          std::to_string(kSchemaVersion) +
                                          " would leave 1 broken foreign key(s); the file was "
                                          "not changed"),
            std::string::npos)
      << store.status().message();
  // Its schema and rows as they were (the journal mode, set before migrating, aside).
  EXPECT_EQ(SchemaOf(path), schema_before);
  EXPECT_EQ(RawDb(path).Query("SELECT * FROM events ORDER BY id"), events_before);
  EXPECT_EQ(RawDb(path).Query("PRAGMA user_version"), std::to_string(kSchemaVersion - 1));
}

// Every table's rows as text, ordered by their key; `runs` with the columns version 3 had.
std::string RowsOfVersion3Tables(const std::string& path) {
  RawDb db(path);
  std::string rows;
  for (const char* query : {
           "SELECT * FROM config_versions ORDER BY hash",
           "SELECT * FROM config_state_history ORDER BY id",
           "SELECT id, cpu_model, cpu_cores, memory_bytes, device, device_memory_bytes FROM "
           "hardware ORDER BY id",
           "SELECT * FROM software ORDER BY id",
           "SELECT id, config_hash, fallback_of, status, created_at, started_at, ended_at, "
           "deadline_at, microbatch, accumulation_steps, checkpoint_blocks, precision, "
           "hardware_id, software_id, shapes, seeds, data_fingerprint, throughput_method, "
           "parameters_bytes, gradients_bytes, optimizer_state_bytes, activations_bytes, "
           "temporaries_bytes, inputs_bytes, peak_bytes, samples_per_second, "
           "tokens_per_second, mfu, cost_per_sample, final_loss FROM runs ORDER BY id",
           "SELECT * FROM update_metrics ORDER BY run_id, update_index",
           "SELECT run_id, slice, update_index, loss FROM slice_evals "
           "ORDER BY run_id, update_index, slice",
           "SELECT * FROM events ORDER BY id",
           "SELECT id, run_id, artifact_path, artifact_hash, gate_passed, gate_details, "
           "created_at, is_current FROM releases ORDER BY id",
           "SELECT * FROM sqlite_sequence ORDER BY name",
       }) {
    rows += std::string(query) + "\n" + db.Query(query) + "\n";
  }
  return rows;
}

TEST(SchemaTest, MigratingVersion3KeepsEveryRowAndValueAndAddsNoParityTime) {
  TempDir dir;
  const std::string path = dir.File("v3.db");
  WriteFixture(3, path);
  const std::string before = RowsOfVersion3Tables(path);
  ASSERT_NE(before.find("|deadline|"), std::string::npos) << before;
  ASSERT_TRUE(IsOk(Store::Open(path)));
  EXPECT_EQ(RawDb(path).Query("PRAGMA user_version"), std::to_string(kSchemaVersion));
  EXPECT_EQ(RowsOfVersion3Tables(path), before);
  EXPECT_EQ(RawDb(path).Query("SELECT count(*) FROM runs WHERE parity_seconds IS NOT NULL"), "0");
  EXPECT_EQ(RawDb(path).Query("PRAGMA foreign_key_check"), "");
  // The migrated table takes the new status and column.
  RawDb(path).Exec("UPDATE runs SET status = 'rejected', parity_seconds = 1.5 WHERE id = 7");
  EXPECT_EQ(RawDb(path).Query("SELECT status, parity_seconds FROM runs WHERE id = 7"),
            "rejected|1.5");
}

TEST(SchemaTest, ReadOnlyOpenOfAnOlderVersionAsksForAMigrationAndChangesNothing) {
  TempDir dir;
  const std::string path = dir.File("old.db");
  WriteFixture(kSchemaVersion - 1, path);
  const std::string before = ReadBytes(path);
  Result<std::unique_ptr<Store>> store = Store::OpenReadOnly(path);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(store.status().message().find("migrate"), std::string::npos);
  EXPECT_EQ(ReadBytes(path), before);
}

TEST(SchemaTest, NewerVersionIsRefusedAndLeftUntouched) {
  TempDir dir;
  const std::string path = dir.File("runs.db");
  ASSERT_TRUE(IsOk(Store::Open(path)));
  RawDb(path).Exec("PRAGMA user_version = " + std::to_string(kSchemaVersion + 1));
  ExpectRefused(path, Status::Code::kFailedPrecondition);
  Result<std::unique_ptr<Store>> store = Store::Open(path);
  EXPECT_NE(store.status().message().find("newer"), std::string::npos);
}

TEST(SchemaTest, EmptyFileBecomesANewStore) {
  TempDir dir;
  const std::string path = dir.File("runs.db");
  WriteBytes(path, "");
  ASSERT_TRUE(IsOk(Store::Open(path)));
  EXPECT_EQ(RawDb(path).Query("PRAGMA user_version"), std::to_string(kSchemaVersion));
}

TEST(SchemaTest, AnotherApplicationsDatabaseIsRefused) {
  TempDir dir;
  const std::string path = dir.File("other.db");
  RawDb(path).Exec(
      "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT);"
      "INSERT INTO notes (body) VALUES ('keep me');");
  ExpectRefused(path, Status::Code::kInvalidArgument);
  EXPECT_EQ(RawDb(path).Query("SELECT body FROM notes"), "keep me");
}

TEST(SchemaTest, DatabaseWithAnotherApplicationIdIsRefused) {
  TempDir dir;
  const std::string path = dir.File("other.db");
  RawDb(path).Exec("PRAGMA application_id = 1234;");
  ExpectRefused(path, Status::Code::kInvalidArgument);
}

TEST(SchemaTest, TextFileIsRefused) {
  TempDir dir;
  const std::string path = dir.File("runs.db");
  WriteBytes(path, "model: tiny\nupdates: 3\n# not a database\n");
  ExpectRefused(path, Status::Code::kCorruption);
}

TEST(SchemaTest, RandomBytesAreRefused) {
  TempDir dir;
  const std::string path = dir.File("runs.db");
  std::mt19937 random(7);
  std::string bytes(8192, '\0');
  for (char& byte : bytes) byte = static_cast<char>(random());
  WriteBytes(path, bytes);
  ExpectRefused(path, Status::Code::kCorruption);
}

// A store whose file has grown past its first pages: a config of 100 KB spans many.
std::string WriteStoreOfManyPages(const TempDir& dir) {
  const std::string path = dir.File("runs.db");
  Result<std::unique_ptr<Store>> store = Store::Open(path);
  EXPECT_TRUE(IsOk(store));
  EXPECT_TRUE(IsOk((*store)->RecordConfigVersion({"cfg", std::string(100'000, 'x'), 1.0})));
  return path;  // closing the only connection checkpoints the WAL into the file
}

TEST(SchemaTest, TruncatedStoreIsRefused) {
  TempDir dir;
  const std::string path = WriteStoreOfManyPages(dir);
  const std::string whole = ReadBytes(path);
  ASSERT_GT(whole.size(), 65'536u);
  WriteBytes(path, std::string_view(whole).substr(0, whole.size() / 2));
  ExpectRefused(path, Status::Code::kCorruption);
}

TEST(SchemaTest, StoreWithADamagedPageIsRefused) {
  TempDir dir;
  const std::string path = WriteStoreOfManyPages(dir);
  const std::size_t page_size = std::stoul(RawDb(path).Query("PRAGMA page_size"));
  std::string bytes = ReadBytes(path);
  ASSERT_GT(bytes.size(), 4 * page_size);
  // Garbage over the last page; the schema on the first pages still reads fine, so only
  // the integrity check on open finds it.
  std::mt19937 random(11);
  for (std::size_t i = bytes.size() - page_size; i < bytes.size(); ++i) {
    bytes[i] = static_cast<char>(random());
  }
  WriteBytes(path, bytes);
  ExpectRefused(path, Status::Code::kCorruption);
}

}  // namespace
}  // namespace trainerd::store
