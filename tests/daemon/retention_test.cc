// The retention policy over ten simulated nights on a real run store and real files, with the
// clock set by the test: exactly what the policy keeps stays (the newest releases, the
// current one, the one it replaced, the rollback target, pinned ones; files of recent runs),
// and a pass cut off between recording and removing leaves no record naming missing files.
#include "trainerd/daemon/retention.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "../support/delegating_file_store.h"
#include "../support/killed_child.h"
#include "../support/temp_dir.h"
#include "trainerd/daemon/state_layout.h"

namespace trainerd::daemon {
namespace {

namespace fs = std::filesystem;
constexpr double kDay = 24 * 3600;

class SetClock final : public Clock {
 public:
  double Now() const override { return now; }
  double now = 1'800'000'000;
};

// The local filesystem, except that the first removal does nothing: the daemon was killed
// after recording what it removes and before removing it.
class KilledBeforeTheFirstRemoval final : public testing::DelegatingFileStore {
 public:
  void Remove(const std::string& path) override {
    if (killed_) DelegatingFileStore::Remove(path);
    killed_ = true;
  }

 private:
  bool killed_ = false;
};

// The local filesystem, checking at each removal of a release's folder that the store
// already records it as removed: the record comes first.
class RecordedBeforeRemoved final : public testing::DelegatingFileStore {
 public:
  explicit RecordedBeforeRemoved(store::Store& store) : store_(store) {}
  void Remove(const std::string& path) override {
    const Result<std::vector<store::Release>> releases = store_.ListReleases(100);
    for (const store::Release& r : releases.ok() ? *releases : std::vector<store::Release>{}) {
      if (fs::path(r.artifact_path).parent_path() == fs::path(path)) {
        EXPECT_TRUE(r.files_removed_at.has_value()) << path << " removed before it was recorded";
      }
    }
    DelegatingFileStore::Remove(path);
  }

 private:
  store::Store& store_;
};

store::Release Made(std::int64_t id, bool current = false) {
  store::Release r;
  r.id = id;
  r.gate_passed = true;
  r.current = current;
  return r;
}

TEST(ReleasesToRemoveTest, KeepsTheNewestTheCurrentItsPredecessorTheRollbackTargetAndPinned) {
  std::vector<store::Release> releases;
  for (std::int64_t id = 1; id <= 10; ++id) releases.push_back(Made(id));
  releases[6].current = true;           // 7: rolled back to, after 8, 9 and 10
  releases[6].previous_release_id = 4;  // went live after 4
  releases[5].withdrawn_json = "{}";    // 6: withdrawn, so 5 is the rollback target
  releases[1].pinned = true;            // 2
  releases[0].files_removed_at = 1;     // 1: gone already
  EXPECT_EQ(ReleasesToRemove(releases, 3), (std::vector<std::int64_t>{3, 6}));
  EXPECT_EQ(ReleasesToRemove(releases, 1), (std::vector<std::int64_t>{3, 6, 8, 9}));
}

class RetentionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.state_dir = dir_.File("state");
    config_.retention.releases = 3;
    config_.retention.files_seconds = 5 * kDay;
    ASSERT_TRUE(StateLayout(config_.state_dir).CreateDirectories().ok());
    Result<std::unique_ptr<store::Store>> store = store::Store::Open(config_.database_path());
    ASSERT_TRUE(store.ok()) << store.status().message();
    store_ = std::move(*store);
    ASSERT_TRUE(store_->RecordConfigVersion({"cfg", "model: {kind: gpt}\n", 1.0}).ok());
  }

  static void WriteBytes(const std::string& path, std::size_t bytes) {
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream(path) << std::string(bytes, 'x');
  }

  // A night: a run with its log, report and data profile (the data of night 1, of nights 2-3,
  // 4-7 and 8-10 the same), and its model released and made current.
  std::int64_t Night() {
    clock_.now += kDay;
    store::RunRecord run;
    run.config_hash = "cfg";
    ++nights_;
    run.data_fingerprint = nights_ == 1 ? "d0" : nights_ <= 3 ? "d1" : nights_ <= 7 ? "d2" : "d3";
    run.created_at = clock_.now;
    run.deadline_at = clock_.now + 3600;
    const std::int64_t run_id = *store_->CreateRun(run);
    EXPECT_TRUE(store_->MarkRunStarted(run_id, clock_.now).ok());
    run.id = run_id;
    run.status = store::RunStatus::kSucceeded;
    run.started_at = clock_.now;
    run.ended_at = clock_.now + 60;
    run.plan = PlanSpec{8, 1, {}, Precision::kFp32};
    EXPECT_TRUE(store_->FinishRun(run, {}, {}, {}).ok());
    const StateLayout layout(config_.state_dir);
    WriteBytes(layout.RunLog(run_id), 100);
    WriteBytes(layout.RunReport(run_id), 200);
    WriteBytes(layout.DataProfile(run.data_fingerprint), 50);
    std::string sha(64, 'a');
    const std::string id_hex = std::to_string(run_id);  // digits are hex digits too
    sha.replace(0, id_hex.size(), id_hex);
    const std::string folder = layout.ReleaseDir(run_id, sha, true);
    WriteBytes(folder + "/model.pt", 1000);
    const std::int64_t id = *store_->RecordRelease(
        {0, run_id, folder + "/model.pt", sha, true, "{}", clock_.now, false});
    EXPECT_TRUE(store_->SetCurrentRelease(id, clock_.now).ok());
    return id;
  }

  // A run of its own and its model at `artifact`, recorded as a release the gate withheld.
  void RecordRelease(const std::string& artifact) {
    store::RunRecord run;
    run.config_hash = "cfg";
    run.created_at = clock_.now;
    run.deadline_at = clock_.now + 1;
    const Result<std::int64_t> run_id = store_->CreateRun(run);
    ASSERT_TRUE(run_id.ok()) << run_id.status().message();
    ASSERT_TRUE(store_
                    ->RecordRelease({0, *run_id, artifact, std::string(64, 'a'), false, "{}",
                                     clock_.now, false})
                    .ok());
  }

  bool FolderExists(std::int64_t release) {
    return fs::exists(fs::path(store_->GetRelease(release)->artifact_path).parent_path());
  }

  // No record names files that are gone: a release kept by the store has its folder.
  void ExpectNoRecordNamesMissingFiles() {
    const Result<std::vector<store::Release>> releases = store_->ListReleases(100);
    ASSERT_TRUE(releases.ok());
    for (const store::Release& r : *releases) {
      if (!r.files_removed_at) {
        EXPECT_TRUE(FolderExists(r.id)) << "release " << r.id;
      }
    }
  }

  testing::TempDir dir_;
  DaemonConfig config_;
  int nights_ = 0;
  SetClock clock_;
  std::unique_ptr<store::Store> store_;
};

TEST_F(RetentionTest, TenNightsKeepExactlyWhatThePolicySays) {
  RecordedBeforeRemoved files(*store_);
  Retention retention(config_, *store_, files, clock_, nullptr);
  std::vector<std::int64_t> ids;
  for (int night = 1; night <= 10; ++night) {
    ids.push_back(Night());
    if (night == 2) {
      ASSERT_TRUE(store_->SetReleasePinned(ids.back(), true).ok());
    }
    Result<RetentionReport> report = retention.Apply();
    ASSERT_TRUE(report.ok()) << report.status().message();
    ExpectNoRecordNamesMissingFiles();
    // Kept: the newest three (the current one, the one it replaced, the rollback target
    // among them) and the pinned release of night 2.
    std::set<std::int64_t> expected;
    if (night >= 2) expected.insert(2);
    for (int back = 0; back < 3 && back < night; ++back) expected.insert(ids[night - 1 - back]);
    std::set<std::int64_t> kept;
    for (const std::int64_t id : ids) {
      if (FolderExists(id)) kept.insert(id);
      EXPECT_EQ(FolderExists(id), !store_->GetRelease(id)->files_removed_at) << id;
    }
    EXPECT_EQ(kept, expected) << "night " << night;
    EXPECT_GT(report->storage_bytes, 0);
    EXPECT_EQ(report->night_bytes, 1000 + 100 + 200 + 50) << "night " << night;
    const store::RunRecord run = *store_->GetRun(store_->GetRelease(ids.back())->run_id);
    EXPECT_EQ(run.storage_bytes, 1000 + 100 + 200 + 50) << "night " << night;
    EXPECT_EQ(run.state_dir_bytes, report->storage_bytes) << "night " << night;
  }
  // Logs and reports of runs more than five days old are gone, the rest stay.
  const StateLayout layout(config_.state_dir);
  for (std::int64_t run = 1; run <= 10; ++run) {
    EXPECT_EQ(fs::exists(layout.RunLog(run)), run >= 5) << run;
    EXPECT_EQ(fs::exists(layout.RunReport(run)), run >= 5) << run;
  }
  // Night 1's data is gone; nights 2-3's is the pinned release's, night 4's is night 5's.
  EXPECT_FALSE(fs::exists(layout.DataProfile("d0")));
  EXPECT_TRUE(fs::exists(layout.DataProfile("d1")));
  EXPECT_TRUE(fs::exists(layout.DataProfile("d2")));
  EXPECT_TRUE(fs::exists(layout.DataProfile("d3")));
  // A release whose files are gone never becomes current again.
  EXPECT_EQ(store_->SetCurrentRelease(ids[3], clock_.now).code(),
            Status::Code::kFailedPrecondition);
  Result<std::vector<store::Event>> events = store_->ListRecentEvents(100);
  ASSERT_TRUE(events.ok());
  int retention_events = 0;
  for (const store::Event& e : *events) retention_events += e.kind == "retention";
  EXPECT_EQ(retention_events, 6) << "nights 4 and 6 to 10 removed a release each";
}

// Releases made before releases had folders are files, some under releases/rejected/:
// removing one removes that file, not the folder it shares with the others.
TEST_F(RetentionTest, AnOldReleaseThatIsAFileGoesAloneNotItsFolder) {
  const std::string rejected = config_.state_dir + "/releases/rejected";
  const std::string old_release = rejected + "/run-1-" + std::string(12, 'a') + ".pt";
  const std::string other = rejected + "/run-9-" + std::string(12, 'f') + ".pt";
  WriteBytes(old_release, 500);
  WriteBytes(other, 700);
  RecordRelease(old_release);
  config_.retention.releases = 1;
  for (int night = 0; night < 2; ++night) Night();
  LocalFileStore files;
  Result<RetentionReport> report = Retention(config_, *store_, files, clock_, nullptr).Apply();
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_EQ(report->releases_removed, (std::vector<std::int64_t>{1}));
  EXPECT_FALSE(fs::exists(old_release));
  EXPECT_TRUE(fs::exists(other)) << "the folder it shared stays";
}

// A pass killed anywhere by SIGKILL, 25 times over nights that each add a release: no record
// ever names files that are gone, and the next pass (the next start-up) removes what the
// killed one recorded as removed.
TEST_F(RetentionTest, KilledAtRandomPointsNoRecordNamesMissingFilesAndTheNextPassFinishes) {
  std::mt19937 random(20261206);
  std::uniform_int_distribution<int> delay_us(0, 4000);
  for (int trial = 0; trial < 25; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial));
    Night();
    store_.reset();  // the child opens its own connection, as a daemon would
    const testing::ChildEnd end = testing::RunAndKillAfter(
        [&] {
          Result<std::unique_ptr<store::Store>> store = store::Store::Open(config_.database_path());
          LocalFileStore files;
          return store.ok() && Retention(config_, **store, files, clock_, nullptr).Apply().ok();
        },
        std::chrono::microseconds(delay_us(random)));
    ASSERT_FALSE(end.failed) << "the pass failed";
    Result<std::unique_ptr<store::Store>> reopened = store::Store::Open(config_.database_path());
    ASSERT_TRUE(reopened.ok()) << reopened.status().message();
    store_ = std::move(*reopened);
    ExpectNoRecordNamesMissingFiles();
    LocalFileStore files;
    ASSERT_TRUE(Retention(config_, *store_, files, clock_, nullptr).Apply().ok());
    const Result<std::vector<store::Release>> releases = store_->ListReleases(1000);
    ASSERT_TRUE(releases.ok()) << releases.status().message();
    for (const store::Release& r : *releases) {
      EXPECT_EQ(FolderExists(r.id), !r.files_removed_at.has_value()) << "release " << r.id;
    }
  }
}

// A database restored into another state directory names the original's release folders:
// they are not this daemon's to remove, nor is what a symlinked folder leads to.
TEST_F(RetentionTest, PathsOutsideTheStateDirectoryOrBehindASymlinkAreLeftAlone) {
  const std::string original = dir_.File("original/releases/run-1-" + std::string(12, 'a'));
  WriteBytes(original + "/model.pt", 500);
  const std::string elsewhere = dir_.File("elsewhere");
  WriteBytes(elsewhere + "/run-2-" + std::string(12, 'b') + "/model.pt", 600);
  fs::create_directory_symlink(elsewhere, config_.state_dir + "/releases/linked");
  const std::string behind_link =
      config_.state_dir + "/releases/linked/run-2-" + std::string(12, 'b');
  for (const std::string& folder : {original, behind_link}) RecordRelease(folder + "/model.pt");
  config_.retention.releases = 1;
  Night();
  LocalFileStore files;
  Result<RetentionReport> report = Retention(config_, *store_, files, clock_, nullptr).Apply();
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_EQ(report->releases_removed, (std::vector<std::int64_t>{1, 2}));
  EXPECT_TRUE(fs::exists(original + "/model.pt"));
  EXPECT_TRUE(fs::exists(behind_link + "/model.pt"));
  EXPECT_EQ(std::set<std::string>(report->paths_refused.begin(), report->paths_refused.end()),
            (std::set<std::string>{original, behind_link}));
  EXPECT_EQ(report->bytes_removed, 0) << "only what was removed is counted";
  const Result<std::vector<store::Event>> events = store_->ListRecentEvents(10);
  ASSERT_TRUE(events.ok());
  ASSERT_FALSE(events->empty());
  EXPECT_EQ(events->front().kind, "retention_refused");
  EXPECT_EQ(events->front().severity, store::Severity::kWarning);
}

TEST(StateLayoutTest, HoldsOnlyWhatLiesBelowItWithNoSymlinkOnTheWay) {
  testing::TempDir dir;
  const StateLayout layout(dir.File("state"));
  ASSERT_TRUE(layout.CreateDirectories().ok());
  EXPECT_TRUE(layout.Holds(dir.File("state/releases/run-1-abc")));
  EXPECT_TRUE(layout.Holds(dir.File("state/logs/run-1.log")));
  EXPECT_FALSE(layout.Holds(dir.File("state")));
  EXPECT_FALSE(layout.Holds(dir.File("state/../other/releases/run-1")));
  EXPECT_FALSE(layout.Holds(dir.File("state-other/releases/run-1")));
  EXPECT_FALSE(layout.Holds("/etc/passwd"));
  fs::create_directory_symlink("/tmp", dir.File("state/releases/tmp"));
  EXPECT_FALSE(layout.Holds(dir.File("state/releases/tmp/run-1")));
  EXPECT_TRUE(layout.Holds(dir.File("state/releases/tmp"))) << "the link itself is removable";
}

TEST_F(RetentionTest,
       APassKilledBeforeItRemovedLeavesNoRecordNamingMissingFilesAndTheNextFinishes) {
  std::vector<std::int64_t> ids;
  for (int night = 1; night <= 5; ++night) ids.push_back(Night());
  KilledBeforeTheFirstRemoval killed;
  Retention first(config_, *store_, killed, clock_, nullptr);
  ASSERT_TRUE(first.Apply().ok());
  ExpectNoRecordNamesMissingFiles();
  // Releases 1 and 2 go, newest first: the cut-off removal is release 2's.
  EXPECT_TRUE(store_->GetRelease(ids[1])->files_removed_at.has_value());
  EXPECT_TRUE(FolderExists(ids[1])) << "the removal that was cut off";
  EXPECT_FALSE(FolderExists(ids[0]));
  LocalFileStore files;
  Retention next(config_, *store_, files, clock_, nullptr);
  Result<RetentionReport> report = next.Apply();
  ASSERT_TRUE(report.ok());
  EXPECT_FALSE(FolderExists(ids[1])) << "finished by the next pass";
  EXPECT_TRUE(report->releases_removed.empty());
  EXPECT_EQ(report->bytes_removed, 1000);
}

}  // namespace
}  // namespace trainerd::daemon
