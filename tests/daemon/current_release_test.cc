// releases/current follows the store's current release: repaired at start-up after a switch
// that failed or was killed between the record and the link, on a real run store and real
// folders, and across SIGKILLs at random points of a process switching releases.
#include "trainerd/daemon/current_release.h"

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

// The local filesystem, except that every link switch fails.
class LinkFails final : public testing::DelegatingFileStore {
 public:
  Status ReplaceSymlink(const std::string&, const std::string&) override {
    return Status::IOError("no space left on device");
  }
};

class CurrentReleaseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(StateLayout(state_dir_).CreateDirectories().ok());
    store_ = Open();
    ASSERT_NE(store_, nullptr);
    ASSERT_TRUE(store_->RecordConfigVersion({"cfg", "model: {kind: gpt}\n", 1.0}).ok());
    first_ = MakeRelease('a');
    second_ = MakeRelease('b');
  }

  std::unique_ptr<store::Store> Open() const {
    Result<std::unique_ptr<store::Store>> store =
        store::Store::Open(state_dir_ + "/trainerd.db", {.check_integrity_on_open = false});
    return store.ok() ? std::move(*store) : nullptr;
  }

  std::int64_t MakeRelease(char sha) {
    store::RunRecord run;
    run.config_hash = "cfg";
    run.created_at = 1;
    run.deadline_at = 2;
    const std::int64_t run_id = *store_->CreateRun(run);
    const std::string folder =
        StateLayout(state_dir_).ReleaseDir(run_id, std::string(64, sha), true);
    fs::create_directories(folder);
    return *store_->RecordRelease(
        {0, run_id, folder + "/model.pt", std::string(64, sha), true, "{}", 1, false});
  }

  // The folder releases/current resolves to; "" without a link.
  std::string Linked() const {
    std::error_code ec;
    const fs::path target = fs::canonical(StateLayout(state_dir_).CurrentReleaseLink(), ec);
    return ec ? "" : target.string();
  }
  std::string FolderOf(store::Store& store, std::int64_t release) const {
    return fs::canonical(fs::path(store.GetRelease(release)->artifact_path).parent_path()).string();
  }

  testing::TempDir dir_;
  const std::string state_dir_ = dir_.File("state");
  std::unique_ptr<store::Store> store_;
  std::int64_t first_ = 0;
  std::int64_t second_ = 0;
};

TEST_F(CurrentReleaseTest, TheLinkFollowsTheStoreAndGoesWithoutACurrentRelease) {
  LocalFileStore files;
  ASSERT_TRUE(SyncCurrentReleaseLink(*store_, files, state_dir_).ok());
  EXPECT_EQ(Linked(), "") << "no release is current";
  ASSERT_TRUE(store_->SetCurrentRelease(first_, 10).ok());
  ASSERT_TRUE(SyncCurrentReleaseLink(*store_, files, state_dir_).ok());
  EXPECT_EQ(Linked(), FolderOf(*store_, first_));
  EXPECT_EQ(fs::read_symlink(StateLayout(state_dir_).CurrentReleaseLink()).string(),
            fs::path(FolderOf(*store_, first_)).filename().string())
      << "relative: the state directory can move";
}

// A state directory copied to another path keeps the records of the old one: the link must
// name its own folder, not the old path (which the start-up's sync would otherwise make it).
TEST_F(CurrentReleaseTest, AMovedStateDirectoryLinksToItsOwnFolders) {
  ASSERT_TRUE(store_->SetCurrentRelease(second_, 10).ok());
  LocalFileStore files;
  ASSERT_TRUE(SyncCurrentReleaseLink(*store_, files, state_dir_).ok());
  store_.reset();
  const std::string moved = dir_.File("moved");
  fs::copy(state_dir_, moved, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  fs::remove_all(state_dir_);  // the old path is gone
  Result<std::unique_ptr<store::Store>> store =
      store::Store::Open(moved + "/trainerd.db", {.check_integrity_on_open = false});
  ASSERT_TRUE(store.ok()) << store.status().message();
  fs::remove(moved + "/releases/current");
  ASSERT_TRUE(SyncCurrentReleaseLink(**store, files, moved).ok());
  std::error_code ec;
  const fs::path linked = fs::canonical(moved + "/releases/current", ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(linked.parent_path(), fs::canonical(moved + "/releases"));
  EXPECT_EQ(linked.filename().string().substr(0, 6), "run-2-");
}

TEST_F(CurrentReleaseTest, ASwitchWhoseLinkFailedIsRepairedAtTheNextSync) {
  LocalFileStore files;
  ASSERT_TRUE(store_->SetCurrentRelease(first_, 10).ok());
  ASSERT_TRUE(SyncCurrentReleaseLink(*store_, files, state_dir_).ok());
  // The outcome watch withdraws... and the link switch fails: the record and the link disagree.
  ASSERT_TRUE(store_->SetCurrentRelease(second_, 20).ok());
  LinkFails failing;
  EXPECT_FALSE(SyncCurrentReleaseLink(*store_, failing, state_dir_).ok());
  EXPECT_EQ(Linked(), FolderOf(*store_, first_));
  // The next start-up's sync.
  ASSERT_TRUE(SyncCurrentReleaseLink(*store_, files, state_dir_).ok());
  EXPECT_EQ(Linked(), FolderOf(*store_, second_));
}

// A process that switches the current release back and forth, record then link, is killed at
// random moments; after each kill a start-up's sync leaves the link naming the store's current
// release, and the record is intact.
TEST_F(CurrentReleaseTest, KilledAtRandomPointsOfSwitchesTheStartUpSyncMakesLinkAndRecordAgree) {
  ASSERT_TRUE(store_->SetCurrentRelease(first_, 10).ok());
  store_.reset();
  std::mt19937 random(20261206);
  std::uniform_int_distribution<int> delay_us(200, 20000);
  int disagreed_before_sync = 0;
  for (int trial = 0; trial < 25; ++trial) {
    const testing::ChildEnd end = testing::RunAndKillAfter(
        [&] {
          std::unique_ptr<store::Store> store = Open();
          LocalFileStore files;
          for (int i = 0; store; ++i) {
            const std::int64_t next = i % 2 == 0 ? first_ : second_;
            if (!store->SetCurrentRelease(next, 100 + i).ok() ||
                !SyncCurrentReleaseLink(*store, files, state_dir_).ok()) {
              break;
            }
          }
          return false;
        },
        std::chrono::microseconds(delay_us(random)));
    ASSERT_TRUE(end.killed) << "trial " << trial << ": the switcher failed";
    std::unique_ptr<store::Store> store = Open();
    ASSERT_NE(store, nullptr) << "trial " << trial;
    Result<std::optional<store::Release>> current = store->CurrentRelease();
    ASSERT_TRUE(current.ok() && current->has_value()) << "trial " << trial;
    const std::string expected = FolderOf(*store, (*current)->id);
    disagreed_before_sync += Linked() != expected;
    LocalFileStore files;
    ASSERT_TRUE(SyncCurrentReleaseLink(*store, files, state_dir_).ok()) << "trial " << trial;
    EXPECT_EQ(Linked(), expected) << "trial " << trial;
  }
  // How often a kill fell between the record and the link: the case the sync exists for.
  ::testing::Test::RecordProperty("disagreed_before_sync", disagreed_before_sync);
}

}  // namespace
}  // namespace trainerd::daemon
