// Release folders staged, put in place whole, then recorded; what a failure or a kill leaves
// is collected at start-up. Real folders, a real run store, SIGKILL at random points.
#include "trainerd/daemon/release_folders.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <random>

#include "../support/delegating_file_store.h"
#include "../support/killed_child.h"
#include "../support/temp_dir.h"
#include "trainerd/daemon/state_layout.h"

namespace trainerd::daemon {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kModelBytes = 256 * 1024;

class ReleaseFoldersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(StateLayout(state_dir_).CreateDirectories().ok());
    std::unique_ptr<store::Store> store = Open();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->RecordConfigVersion({"cfg", "model: {kind: gpt}\n", 1.0}).ok());
  }

  std::unique_ptr<store::Store> Open() const {
    Result<std::unique_ptr<store::Store>> store =
        store::Store::Open(state_dir_ + "/trainerd.db", {.check_integrity_on_open = false});
    return store.ok() ? std::move(*store) : nullptr;
  }

  // The release step's publish: a run, its folder staged with model.pt and model.json, then
  // the release recorded.
  Status Publish(store::Store& store, FileStore& files, int night) const {
    store::RunRecord run;
    run.config_hash = "cfg";
    run.created_at = night;
    run.deadline_at = night + 1;
    Result<std::int64_t> run_id = store.CreateRun(run);
    if (!run_id.ok()) return run_id.status();
    const std::string sha(64, static_cast<char>('a' + night % 6));
    const std::string folder = StateLayout(state_dir_).ReleaseDir(*run_id, sha, night % 3 != 0);
    Status staged = StageReleaseFolder(files, folder, [&](const std::string& staging) {
      if (Status s = files.WriteAtomically(staging + "/model.pt", std::string(kModelBytes, 'm'));
          !s.ok()) {
        return s;
      }
      return files.WriteAtomically(staging + "/model.json", "{}\n");
    });
    if (!staged.ok()) return staged;
    return store
        .RecordRelease({0, *run_id, folder + "/model.pt", sha, night % 3 != 0, "{}", 1.0, false})
        .status();
  }

  // After a start-up's collection: every recorded release has its whole folder, every folder
  // under releases/ has its record, no staging folder is left.
  void ExpectFilesAndRecordsAgree(store::Store& store) const {
    const std::vector<store::Release> releases = *store.ListReleases(100000);
    for (const store::Release& r : releases) {
      EXPECT_EQ(fs::file_size(r.artifact_path), kModelBytes) << r.artifact_path;
      EXPECT_TRUE(fs::exists(fs::path(r.artifact_path).parent_path() / "model.json"));
    }
    std::size_t folders = 0;
    for (const fs::path& dir :
         {fs::path(state_dir_) / "releases", fs::path(state_dir_) / "releases/rejected"}) {
      for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
        const std::string name = entry.path().filename().string();
        EXPECT_NE(name.rfind(".staging-", 0), 0u) << entry.path();
        folders += name.rfind("run-", 0) == 0;
      }
    }
    EXPECT_EQ(folders, releases.size());
  }

  testing::TempDir dir_;
  const std::string state_dir_ = dir_.File("state");
};

// A full disk midway: nothing under the release's name, no staging left.
class FullDiskAtModelJson final : public testing::DelegatingFileStore {
 public:
  Status WriteAtomically(const std::string& path, const std::string& contents) override {
    if (path.ends_with("model.json")) return Status::IOError(path + ": no space left on device");
    return DelegatingFileStore::WriteAtomically(path, contents);
  }
};

// A name the worker gives can never place a file outside the release folder: before it was
// normalised, "adapter/../../../x" started with "adapter" and passed.
TEST(CompanionNameTest, APathBelowTheWeightsKeepsItsPlaceAnythingElseOnlyItsName) {
  const std::string weights = "/state/work/model.safetensors";
  EXPECT_EQ(CompanionName(weights, "/state/work/config.json"), "config.json");
  EXPECT_EQ(CompanionName(weights, "/state/work/adapter/adapter_config.json"),
            "adapter/adapter_config.json");
  EXPECT_EQ(CompanionName(weights, "/state/work/adapter/../../../etc/x"), "x");
  EXPECT_EQ(CompanionName(weights, "/state/work/./adapter/./a.json"), "adapter/a.json");
  EXPECT_EQ(CompanionName(weights, "/elsewhere/tokenizer.json"), "tokenizer.json");
  EXPECT_EQ(CompanionName(weights, "/state/work/.."), "");
}

TEST_F(ReleaseFoldersTest, AFailedPublishLeavesNoFolderAndNoStaging) {
  std::unique_ptr<store::Store> store = Open();
  FullDiskAtModelJson full;
  EXPECT_FALSE(Publish(*store, full, 1).ok());
  for (const fs::directory_entry& entry : fs::directory_iterator(state_dir_ + "/releases")) {
    EXPECT_TRUE(entry.is_directory() && entry.path().filename() == "rejected") << entry.path();
  }
  LocalFileStore files;
  const Status published = Publish(*store, files, 2);
  ASSERT_TRUE(published.ok()) << published.message();
  ExpectFilesAndRecordsAgree(*store);
}

TEST_F(ReleaseFoldersTest, StartUpCollectsStagingAndUnrecordedFoldersOnly) {
  std::unique_ptr<store::Store> store = Open();
  LocalFileStore files;
  const Status published = Publish(*store, files, 1);
  ASSERT_TRUE(published.ok()) << published.message();
  const std::string orphan = state_dir_ + "/releases/run-99-" + std::string(12, 'f');
  const std::string staging = state_dir_ + "/releases/.staging-run-98-" + std::string(12, 'e');
  fs::create_directories(orphan);
  fs::create_directories(staging);
  // A state directory copied from elsewhere: its records name the old path, its folders stay.
  const std::string moved_name = "run-7-" + std::string(12, 'd');
  fs::create_directories(state_dir_ + "/releases/" + moved_name);
  store::RunRecord run;
  run.config_hash = "cfg";
  run.created_at = 1;
  run.deadline_at = 2;
  const Result<std::int64_t> run_id = store->CreateRun(run);
  ASSERT_TRUE(run_id.ok());
  ASSERT_TRUE(store
                  ->RecordRelease({0, *run_id, "/old/state/releases/" + moved_name + "/model.pt",
                                   std::string(64, 'd'), true, "{}", 1.0, false})
                  .ok());
  Result<std::vector<std::string>> removed = CollectReleaseOrphans(*store, files, state_dir_);
  ASSERT_TRUE(removed.ok()) << removed.status().message();
  EXPECT_EQ(removed->size(), 2u);
  EXPECT_FALSE(fs::exists(orphan));
  EXPECT_FALSE(fs::exists(staging));
  EXPECT_TRUE(fs::exists(state_dir_ + "/releases/" + moved_name));
}

TEST_F(ReleaseFoldersTest,
       KilledAtRandomPointsOfPublishingTheNextStartUpLeavesFilesAndRecordsAgreeing) {
  std::mt19937 random(20261206);
  std::uniform_int_distribution<int> delay_us(500, 30000);
  int orphans_collected = 0;
  for (int trial = 0; trial < 25; ++trial) {
    const testing::ChildEnd end = testing::RunAndKillAfter(
        [&] {
          std::unique_ptr<store::Store> store = Open();
          LocalFileStore files;
          for (int night = 1; store && Publish(*store, files, trial * 1000 + night).ok(); ++night) {
          }
          return false;
        },
        std::chrono::microseconds(delay_us(random)));
    ASSERT_TRUE(end.killed) << "trial " << trial << ": the publisher failed";
    std::unique_ptr<store::Store> store = Open();
    ASSERT_NE(store, nullptr);
    LocalFileStore files;
    Result<std::vector<std::string>> removed = CollectReleaseOrphans(*store, files, state_dir_);
    ASSERT_TRUE(removed.ok()) << removed.status().message();
    orphans_collected += static_cast<int>(removed->size());
    ExpectFilesAndRecordsAgree(*store);
    if (::testing::Test::HasFailure()) FAIL() << "trial " << trial;
  }
  ::testing::Test::RecordProperty("orphans_collected", orphans_collected);
}

}  // namespace
}  // namespace trainerd::daemon
