// The cycle's metric writer on a real SQLite file: batches are committed in order by its own
// thread, Append never waits for the store (another connection holding the write lock does
// not stop it), Drain reports a refused batch once, and the destructor commits what is queued.
#include "trainerd/daemon/metric_writer.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <memory>
#include <vector>

#include "../support/temp_dir.h"
#include "trainerd/store/store.h"

namespace trainerd::daemon {
namespace {

class MetricWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    loop_store_ = Open();
    writer_store_ = Open();
    store::RunRecord run;
    run.config_hash = "cfg";
    run.created_at = 1;
    run.deadline_at = 2;
    ASSERT_TRUE(loop_store_->RecordConfigVersion({"cfg", "model: {kind: gpt}\n", 1.0}).ok());
    Result<std::int64_t> id = loop_store_->CreateRun(run);
    ASSERT_TRUE(id.ok()) << id.status().message();
    run_id_ = *id;
  }

  std::unique_ptr<store::Store> Open() {
    Result<std::unique_ptr<store::Store>> opened = store::Store::Open(dir_.File("trainerd.db"));
    EXPECT_TRUE(opened.ok()) << opened.status().message();
    return opened.ok() ? std::move(*opened) : nullptr;
  }

  // Updates first..last, each with its number as the loss.
  static std::vector<store::UpdateMetric> Updates(int first, int last) {
    std::vector<store::UpdateMetric> batch;
    for (int u = first; u <= last; ++u) batch.push_back({u, static_cast<double>(u), 1e-3, 1, 1, 0});
    return batch;
  }

  std::vector<std::int64_t> StoredUpdates() {
    const Result<std::vector<store::UpdateMetric>> metrics = loop_store_->GetMetrics(run_id_);
    EXPECT_TRUE(metrics.ok()) << metrics.status().message();
    std::vector<std::int64_t> updates;
    if (!metrics.ok()) return updates;
    for (const store::UpdateMetric& m : *metrics) updates.push_back(m.update);
    return updates;
  }

  testing::TempDir dir_;
  std::unique_ptr<store::Store> loop_store_;
  std::unique_ptr<store::Store> writer_store_;
  std::int64_t run_id_ = 0;
};

TEST_F(MetricWriterTest, DrainReturnsWithEveryBatchCommittedInOrder) {
  MetricWriter writer(*writer_store_);
  for (int b = 0; b < 10; ++b) writer.Append(run_id_, Updates(b * 20 + 1, b * 20 + 20));
  ASSERT_TRUE(writer.Drain().ok());
  std::vector<std::int64_t> expected;
  for (int u = 1; u <= 200; ++u) expected.push_back(u);
  EXPECT_EQ(StoredUpdates(), expected);
}

TEST_F(MetricWriterTest, AppendDoesNotWaitForAStoreLockedByAnotherConnection) {
  sqlite3* other = nullptr;
  ASSERT_EQ(sqlite3_open(dir_.File("trainerd.db").c_str(), &other), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(other, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
  MetricWriter writer(*writer_store_);
  writer.Append(run_id_, Updates(1, 20));
  writer.Append(run_id_, Updates(21, 40));
  // Back from both while the write lock is held: nothing can have been committed yet.
  EXPECT_TRUE(StoredUpdates().empty());
  ASSERT_EQ(sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(other);
  const Status drained = writer.Drain();
  EXPECT_TRUE(drained.ok()) << drained.message();
  EXPECT_EQ(StoredUpdates().size(), 40U);
}

TEST_F(MetricWriterTest, ARefusedBatchIsReportedByTheNextDrainOnlyAndLaterBatchesStillCommit) {
  MetricWriter writer(*writer_store_);
  writer.Append(run_id_ + 1, Updates(1, 5));  // no such run
  writer.Append(run_id_, Updates(1, 5));
  const Status drained = writer.Drain();
  EXPECT_FALSE(drained.ok());
  EXPECT_NE(drained.message().find("run " + std::to_string(run_id_ + 1)), std::string::npos)
      << drained.message();
  EXPECT_EQ(StoredUpdates().size(), 5U);
  EXPECT_TRUE(writer.Drain().ok());
}

TEST_F(MetricWriterTest, DestroyingTheWriterCommitsWhatIsQueued) {
  {
    MetricWriter writer(*writer_store_);
    for (int b = 0; b < 5; ++b) writer.Append(run_id_, Updates(b * 10 + 1, b * 10 + 10));
  }
  EXPECT_EQ(StoredUpdates().size(), 50U);
}

}  // namespace
}  // namespace trainerd::daemon
