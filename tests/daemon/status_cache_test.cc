// The cached stored part of `status`: equal to a fresh AnswerFromStore after every kind of
// change (a write by the daemon's own store, a commit by another connection, an edited or
// replaced job file, a reloaded config naming another job), and computed once while
// nothing changed. Real SQLite files, real files.
#include "trainerd/daemon/status_cache.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <memory>

#include "../support/temp_dir.h"
#include "trainerd/daemon/control_queries.h"
#include "trainerd/store/store.h"

namespace trainerd::daemon {
namespace {

class StoredStatusCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteJob("job.yaml", "model: {kind: gpt}\n");
    Result<std::unique_ptr<store::Store>> opened = store::Store::Open(dir_.File("trainerd.db"));
    ASSERT_TRUE(opened.ok()) << opened.status().message();
    store_ = std::move(*opened);
  }

  // Writes a job file last modified an hour ago: older than the racy window.
  void WriteJob(const std::string& name, const std::string& text) {
    const std::string path = dir_.Write(name, text);
    std::filesystem::last_write_time(
        path, std::filesystem::file_time_type::clock::now() - std::chrono::hours(1));
  }

  nlohmann::json Fresh(const std::string& job) {
    return AnswerFromStore(*store_, job, {{"command", "status"}});
  }

  void RecordRun(store::Store& s) {
    store::RunRecord run;
    run.config_hash = "cfg";
    run.created_at = 1;
    run.deadline_at = 2;
    ASSERT_TRUE(s.CreateRun(run).ok());
  }

  testing::TempDir dir_;
  std::unique_ptr<store::Store> store_;
};

TEST_F(StoredStatusCacheTest, ComputedOnceWhileNothingChanges) {
  StoredStatusCache cache(*store_);
  const std::string job = dir_.File("job.yaml");
  EXPECT_EQ(cache.Answer(job), Fresh(job));
  EXPECT_EQ(cache.Answer(job), Fresh(job));
  EXPECT_EQ(cache.Answer(job), Fresh(job));
  EXPECT_EQ(cache.computations(), 1);
}

TEST_F(StoredStatusCacheTest, AWriteOfTheSameStoreIsSeenAtOnce) {
  StoredStatusCache cache(*store_);
  const std::string job = dir_.File("job.yaml");
  EXPECT_TRUE(cache.Answer(job)["result"]["last_run"].is_null());
  ASSERT_TRUE(store_->RecordConfigVersion({"cfg", "model: {kind: gpt}\n", 1.0}).ok());
  RecordRun(*store_);
  EXPECT_EQ(cache.Answer(job)["result"]["last_run"]["id"], 1);
  EXPECT_EQ(cache.Answer(job), Fresh(job));
}

TEST_F(StoredStatusCacheTest, ACommitOfAnotherConnectionIsSeenAtOnce) {
  StoredStatusCache cache(*store_);
  const std::string job = dir_.File("job.yaml");
  EXPECT_TRUE(cache.Answer(job)["result"]["last_run"].is_null());
  {
    Result<std::unique_ptr<store::Store>> other = store::Store::Open(dir_.File("trainerd.db"));
    ASSERT_TRUE(other.ok());
    ASSERT_TRUE((*other)->RecordConfigVersion({"cfg", "model: {kind: gpt}\n", 1.0}).ok());
    RecordRun(**other);
  }
  EXPECT_EQ(cache.Answer(job)["result"]["last_run"]["id"], 1);
  EXPECT_EQ(cache.computations(), 2);
}

TEST_F(StoredStatusCacheTest, AnEditedReplacedOrRemovedJobFileIsSeenAtOnce) {
  StoredStatusCache cache(*store_);
  const std::string job = dir_.File("job.yaml");
  const nlohmann::json before = cache.Answer(job)["result"]["active_config"];
  EXPECT_EQ(before["state"], "new");

  // Same inode, same size, written just now: the file time alone cannot tell.
  dir_.Write("job.yaml", "model: {kind: mlp}\n");
  const nlohmann::json edited = cache.Answer(job)["result"]["active_config"];
  EXPECT_NE(edited["hash"], before["hash"]);
  EXPECT_EQ(cache.Answer(job), Fresh(job));

  WriteJob("next.yaml", "model: {kind: gpt}\n");  // replaced by rename, as editors do
  std::filesystem::rename(dir_.File("next.yaml"), job);
  EXPECT_EQ(cache.Answer(job)["result"]["active_config"]["hash"], before["hash"]);

  std::filesystem::remove(job);
  EXPECT_EQ(cache.Answer(job), Fresh(job));
  EXPECT_TRUE(cache.Answer(job)["result"]["active_config"].empty());
}

TEST_F(StoredStatusCacheTest, AnotherJobPathIsAnotherAnswer) {
  StoredStatusCache cache(*store_);
  WriteJob("other.yaml", "model: {kind: mlp}\n");
  const nlohmann::json first = cache.Answer(dir_.File("job.yaml"));
  const nlohmann::json other = cache.Answer(dir_.File("other.yaml"));
  EXPECT_NE(first["result"]["active_config"]["hash"], other["result"]["active_config"]["hash"]);
  EXPECT_EQ(other, Fresh(dir_.File("other.yaml")));
}

}  // namespace
}  // namespace trainerd::daemon
