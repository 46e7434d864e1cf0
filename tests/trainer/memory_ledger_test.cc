#include "trainerd/trainer/plan/memory_ledger.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "../support/temp_dir.h"
#include "../support/tiny_job_test.h"
#include "trainerd/trainer/device/device_memory.h"
#include "trainerd/trainer/distributed/state_sharding.h"
#include "trainerd/trainer/loop/gradient_accumulation.h"
#include "trainerd/trainer/loop/model_state_bytes.h"
#include "trainerd/trainer/loop/trainer.h"
#include "trainerd/trainer/models/build_model.h"

namespace trainerd {
namespace {

class MemoryLedgerTest : public testing::TinyJobTest {
 protected:
};

TEST_F(MemoryLedgerTest, StaticCategoriesEqualTheAnalyticBytes) {
  Result<MemoryLedger> ledger = MeasureLedger(spec_, *corpus_);
  ASSERT_TRUE(ledger.ok()) << ledger.status().message();
  torch::manual_seed(0);
  const std::int64_t parameters = CountParameters(*BuildModel(spec_.model, 2, "test"));
  EXPECT_EQ(ledger->parameters_bytes, parameters * 4);       // fp32
  EXPECT_EQ(ledger->gradients_bytes, parameters * 4);        // one fp32 gradient each
  EXPECT_EQ(ledger->optimizer_state_bytes, parameters * 8);  // AdamW exp_avg + exp_avg_sq
  // inputs and targets: effective batch x block_size int64 tokens each.
  EXPECT_EQ(ledger->inputs_bytes, 2LL * 8 * 32 * 8);
  EXPECT_GT(ledger->activations_bytes, 0);
  // Temporaries are the peak less the other categories, clamped at 0, so a sum equal to the
  // peak proves nothing. What can fail: the measured categories (activations from the
  // moment after the forward, statics computed) together fit under the allocator's peak.
  EXPECT_LE(ledger->parameters_bytes + ledger->gradients_bytes + ledger->optimizer_state_bytes +
                ledger->inputs_bytes + ledger->activations_bytes,
            ledger->peak_bytes);
  EXPECT_EQ(ledger->usable_bytes, spec_.memory.usable_bytes());
  const nlohmann::json json = ToJson(*ledger);
  for (const char* key : {"parameters_bytes", "gradients_bytes", "optimizer_state_bytes",
                          "activations_bytes", "temporaries_bytes", "inputs_bytes", "peak_bytes",
                          "budget_bytes", "usable_bytes", "blocks"}) {
    EXPECT_TRUE(json.contains(key)) << key;
  }
}

// One rank's ledger of a plan that shards the model's state over 2 ranks: measured on one
// process, it keeps the largest rank's shard of each sharded category and leaves the rest out
// of the peak (stage 2's other gradients stay in it, as temporaries, until they are summed).
TEST_F(MemoryLedgerTest, AShardedPlansLedgerKeepsTheLargestRanksShard) {
  JobSpec job = spec_;
  job.distributed.ranks = 2;
  Result<MemoryLedger> whole = MeasureLedger(RankJob(job), *corpus_);  // unsharded
  ASSERT_TRUE(whole.ok()) << whole.status().message();
  torch::manual_seed(0);
  const std::int64_t outside =
      BytesOutsideLargestShard(BuildModel(spec_.model, 2, "test")->parameters(), 2);
  ASSERT_GT(outside, whole->parameters_bytes / 10);
  ASSERT_LE(outside, whole->parameters_bytes / 2);
  for (const int stage : {1, 2}) {
    SCOPED_TRACE("stage " + std::to_string(stage));
    job.plan.zero_stage = stage;
    Result<MemoryLedger> rank = MeasureLedger(RankJob(job), *corpus_);
    ASSERT_TRUE(rank.ok()) << rank.status().message();
    EXPECT_EQ(rank->sharded_over_ranks, 2);
    EXPECT_EQ(rank->optimizer_state_on_other_ranks, 2 * outside);
    EXPECT_EQ(rank->optimizer_state_bytes, whole->optimizer_state_bytes - 2 * outside);
    EXPECT_NEAR(rank->peak_bytes, whole->peak_bytes - 2 * outside, 0.01 * whole->peak_bytes);
    EXPECT_EQ(rank->gradients_bytes, whole->gradients_bytes - (stage == 2 ? outside : 0));
    EXPECT_NE(LedgerTable(*rank).find("the largest of 2 ranks' shards (ZeRO stage " +
                                      std::to_string(stage) + ")"),
              std::string::npos)
        << LedgerTable(*rank);
  }
}

// An fp16 job whose first update overflows at the initial loss scale (the scaler skips it, so
// AdamW has no state yet) is measured at the first update that stepped: its peak holds the
// optimizer state, as every later update's does.
TEST_F(MemoryLedgerTest, AnFp16FirstUpdateSkippedForOverflowStillCountsTheOptimizerState) {
  spec_.plan = {8, 1, {}, Precision::kFp16};
  Result<MemoryLedger> stepped = MeasureLedger(spec_, *corpus_);
  Result<MemoryLedger> skipped_first =
      MeasureLedger(spec_, *corpus_, TrainingFault::kOverflowFirstUpdate);
  ASSERT_TRUE(stepped.ok()) << stepped.status().message();
  ASSERT_TRUE(skipped_first.ok()) << skipped_first.status().message();
  torch::manual_seed(0);
  const std::int64_t parameters = CountParameters(*BuildModel(spec_.model, 2, "test"));
  EXPECT_EQ(skipped_first->optimizer_state_bytes, parameters * 8);
  EXPECT_EQ(skipped_first->optimizer_state_bytes, stepped->optimizer_state_bytes);
  EXPECT_GE(skipped_first->peak_bytes,
            skipped_first->parameters_bytes + skipped_first->gradients_bytes +
                skipped_first->optimizer_state_bytes + skipped_first->activations_bytes);
}

// Evaluation memory: a large vocabulary's held-out logits, all windows at once in fp32, were
// the run's peak, which no plan could lower. The evaluation now runs in the plan's
// microbatches, its peak is in the ledger's (and the planner's measured) peak, and a budget
// the plan fits holds the evaluation too.
TEST_F(MemoryLedgerTest, ALargeVocabularysEvaluationRunsInThePlansMicrobatchesUnderItsBudget) {
  GptOptions gpt;
  gpt.n_layer = 2;
  gpt.n_head = 2;
  gpt.n_embd = 32;
  gpt.block_size = 32;
  gpt.vocab_size = 32768;  // 4 MiB of fp32 logits per window
  spec_.model = GptModelSpec(gpt);
  spec_.data.eval_windows_per_slice = 8;
  spec_.training.updates = 2;
  JobSpec by_two = spec_, at_once = spec_;
  by_two.plan = {2, 4, {}, Precision::kFp32};
  at_once.plan = {8, 1, {}, Precision::kFp32};  // the evaluation in one piece, as before
  Result<MemoryLedger> two = MeasureLedger(by_two, *corpus_);
  Result<MemoryLedger> whole = MeasureLedger(at_once, *corpus_);
  ASSERT_TRUE(two.ok()) << two.status().message();
  ASSERT_TRUE(whole.ok()) << whole.status().message();
  EXPECT_GT(two->evaluation_peak_bytes, two->parameters_bytes + two->optimizer_state_bytes);
  EXPECT_LT(two->evaluation_peak_bytes, whole->evaluation_peak_bytes);
  EXPECT_GE(two->peak_bytes, two->evaluation_peak_bytes);

  // A budget 10% below the one-piece evaluation's peak, which the 2 x 4 plan's ledger fits
  // with room to spare.
  by_two.memory.reserve_fraction = 0;
  by_two.memory.budget_bytes = whole->evaluation_peak_bytes * 9 / 10;
  ASSERT_GT(by_two.memory.usable_bytes(), two->peak_bytes * 5 / 4);
  testing::TempDir dir;
  TrainerOptions options;
  options.checkpoint_path = dir.File("checkpoint.pt");
  options.model_path = dir.File("model.pt");
  NullEventSink sink;
  Trainer trainer(by_two, *corpus_, &sink);
  Result<TrainOutcome> outcome = [&] {
    const ScopedMemoryLimit limited(MemoryOf(trainer.device()), by_two.memory.usable_bytes());
    return trainer.Run(options);
  }();
  ASSERT_TRUE(outcome.ok()) << outcome.status().message();
  EXPECT_EQ(outcome->kind, TrainOutcome::Kind::kFinished)
      << outcome->message << " at update " << (outcome->details ? outcome->details->update : -1);
  EXPECT_EQ(outcome->eval.size(), corpus_->slices().size());

  // The split changes only the order of the additions: the same losses as in one piece.
  Trainer in_twos(by_two, *corpus_, &sink), in_one(at_once, *corpus_, &sink);
  const std::vector<SliceLoss> a = in_twos.Evaluate(), b = in_one.Evaluate();
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i].loss, b[i].loss, 1e-6 * b[i].loss);
}

TEST_F(MemoryLedgerTest, GradientBytesDoNotDependOnWhetherGradientsAreAllocated) {
  torch::manual_seed(0);
  auto model = BuildModel(spec_.model, 2, "test");
  const std::int64_t expected = CountParameters(*model) * 4;
  EXPECT_EQ(GradientBytes(*model), expected);  // before any backward
  model->forward(torch::randint(0, 256, {2, 8}, torch::kLong)).square().mean().backward();
  ZeroGradients(model->parameters());
  EXPECT_EQ(GradientBytes(*model), expected);
  for (auto& p : model->parameters()) p.mutable_grad().reset();  // as set_to_none would
  EXPECT_EQ(GradientBytes(*model), expected);
}

TEST_F(MemoryLedgerTest, CheckpointingLowersMeasuredActivations) {
  Result<MemoryLedger> plain = MeasureLedger(spec_, *corpus_);
  spec_.plan.checkpoint_blocks = {0, 1};
  Result<MemoryLedger> checkpointed = MeasureLedger(spec_, *corpus_);
  ASSERT_TRUE(plain.ok() && checkpointed.ok());
  EXPECT_LT(checkpointed->activations_bytes, plain->activations_bytes * 3 / 4);
  EXPECT_LT(checkpointed->peak_bytes, plain->peak_bytes);
  ASSERT_EQ(plain->blocks.size(), 2u);
  for (const BlockActivation& b : plain->blocks) {
    EXPECT_LT(b.checkpointed_activation_bytes, b.activation_bytes / 4) << b.index;
  }
}

// Each block's activations are measured as training keeps them, in the batch's sample stream:
// there, on the CPU, dropout keeps no mask, so a block with dropout keeps what one without it
// keeps. Outside a stream torch::dropout would keep its masks, which training never does.
TEST_F(MemoryLedgerTest, BlocksAreMeasuredInTheSampleStreamWhereDropoutKeepsNoMask) {
  Result<MemoryLedger> without = MeasureLedger(spec_, *corpus_);
  spec_.model.options["dropout"] = 0.1;
  Result<MemoryLedger> with = MeasureLedger(spec_, *corpus_);
  ASSERT_TRUE(without.ok() && with.ok());
  ASSERT_EQ(with->blocks.size(), without->blocks.size());
  for (std::size_t i = 0; i < with->blocks.size(); ++i) {
    EXPECT_EQ(with->blocks[i].activation_bytes, without->blocks[i].activation_bytes) << i;
  }
}

TEST_F(MemoryLedgerTest, TableListsCategoriesLargestFirst) {
  Result<MemoryLedger> ledger = MeasureLedger(spec_, *corpus_);
  ASSERT_TRUE(ledger.ok());
  const std::string table = LedgerTable(*ledger);
  const auto activations = table.find("activations");
  const auto inputs = table.find("inputs");
  ASSERT_NE(activations, std::string::npos);
  ASSERT_NE(inputs, std::string::npos);
  EXPECT_LT(activations, inputs) << table;
  EXPECT_NE(table.find("forward"), std::string::npos) << "a measured ledger times each block";
}

}  // namespace
}  // namespace trainerd
