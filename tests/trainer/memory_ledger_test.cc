#include "trainerd/trainer/plan/memory_ledger.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "../support/tiny_job_test.h"
#include "trainerd/trainer/loop/gradient_accumulation.h"
#include "trainerd/trainer/loop/model_state_bytes.h"
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

TEST_F(MemoryLedgerTest, GradientBytesDoNotDependOnWhetherGradientsAreAllocated) {
  torch::manual_seed(0);
  auto model = BuildModel(spec_.model, 2, "test");
  const std::int64_t expected = CountParameters(*model) * 4;
  EXPECT_EQ(GradientBytes(*model), expected);  // before any backward
  torch::optim::AdamW optimizer(model->parameters(), torch::optim::AdamWOptions(1e-3));
  model->forward(torch::randint(0, 256, {2, 8}, torch::kLong)).square().mean().backward();
  ZeroGradients(optimizer);
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
}

}  // namespace
}  // namespace trainerd
