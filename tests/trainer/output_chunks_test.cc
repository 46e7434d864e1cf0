// The output layer in chunks (plan output_chunk, semantics/output_chunks.h): the loss and every
// gradient equal the whole logits' up to rounding, with ignored targets and a chunk that does
// not divide the positions, in fp32 and bf16; the evaluation's loss and prediction tallies the
// same; the ledger's output-layer category and the evaluation's peak at the chunk; the planner
// chunking a model whose output layer keeps more than its largest block and not one whose
// keeps less; the parity check passing a chunked plan and rejecting a chunk boundary that
// drops a token's loss, in fp32 and bf16.
#include "trainerd/trainer/semantics/output_chunks.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <string>
#include <vector>

#include "../support/cuda_test.h"
#include "../support/parity_expectations.h"
#include "../support/tiny_job_test.h"
#include "models/gpt/gpt_spec.h"
#include "trainerd/trainer/loop/gradient_accumulation.h"
#include "trainerd/trainer/loop/trainer.h"
#include "trainerd/trainer/plan/memory_ledger.h"
#include "trainerd/trainer/plan/parity.h"
#include "trainerd/trainer/plan/planner.h"
#include "trainerd/trainer/spec/plan_text.h"

namespace trainerd {
namespace {

class OutputChunksTest : public testing::TinyJobTest {
 protected:
  // The tiny GPT with a 4096-wide vocabulary (the text's bytes use 256 of it): its output
  // layer keeps more for the backward than a block does.
  JobSpec WideVocabulary(int chunk) const {
    GptOptions gpt = GptOptionsOf(spec_.model);
    gpt.vocab_size = 4096;
    JobSpec spec = spec_;
    spec.model = GptModelSpec(gpt);
    spec.plan.output_chunk = chunk;
    return spec;
  }

  struct LossAndGradients {
    double loss = 0;
    std::int64_t count = 0;
    std::vector<torch::Tensor> gradients;
  };
  // One forward and backward of the first microbatch of update 0, five targets ignored.
  LossAndGradients Differentiate(const JobSpec& spec) {
    NullEventSink discard;
    Trainer trainer(spec, *corpus_, &discard);
    Batch batch = trainer.Microbatches(0).front();
    batch.targets = batch.targets.clone();
    batch.targets.index_put_({0, torch::indexing::Slice(0, 5)}, spec.model.loss.ignore_index);
    const LossTerms terms = ForwardLossWithPrecision(trainer.model(), batch, spec.plan.precision);
    terms.sum.backward();
    LossAndGradients out{terms.sum.item<double>(), terms.count, {}};
    for (const torch::Tensor& p : trainer.model().parameters()) out.gradients.push_back(p.grad());
    return out;
  }

  // In fp32 and bf16, chunks of 7 (the batch's 8 x 32 positions leave a short last one) give
  // the whole logits' loss and gradients: to fp32 rounding of sums in another order; in bf16
  // each chunk's weight gradient is rounded to bf16 before the chunks are summed in fp32.
  void ExpectChunksEqualTheWholeLogits() {
    for (const Precision precision : {Precision::kFp32, Precision::kBf16}) {
      SCOPED_TRACE(ToString(precision));
      JobSpec whole = WideVocabulary(0);
      whole.plan.precision = precision;
      JobSpec chunked = WideVocabulary(7);
      chunked.plan.precision = precision;
      const LossAndGradients want = Differentiate(whole);
      const LossAndGradients got = Differentiate(chunked);
      const double tolerance = precision == Precision::kFp32 ? 1e-5 : 2e-2;
      EXPECT_EQ(got.count, want.count);
      EXPECT_EQ(got.count, 8 * 32 - 5);
      EXPECT_NEAR(got.loss, want.loss, tolerance * want.loss);
      ASSERT_EQ(got.gradients.size(), want.gradients.size());
      for (std::size_t i = 0; i < want.gradients.size(); ++i) {
        ASSERT_TRUE(got.gradients[i].defined() && want.gradients[i].defined()) << i;
        const double norm = want.gradients[i].norm().item<double>();
        EXPECT_LE((got.gradients[i] - want.gradients[i]).norm().item<double>(),
                  tolerance * std::max(norm, 1e-12))
            << "parameter " << i;
      }
    }
  }
};

TEST_F(OutputChunksTest, LossAndGradientsEqualTheWholeLogitsInFp32AndBf16) {
  ExpectChunksEqualTheWholeLogits();
}

TEST_F(OutputChunksTest, TheEvaluationsLossAndTalliesAreTheSameInChunks) {
  NullEventSink discard;
  Trainer whole(WideVocabulary(0), *corpus_, &discard);
  Trainer chunked(WideVocabulary(5), *corpus_, &discard);
  const std::vector<SliceLoss> want = whole.Evaluate();
  const std::vector<SliceLoss> got = chunked.Evaluate();
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got[i].loss, want[i].loss, 1e-6 * want[i].loss);
    EXPECT_EQ(got[i].baseline_loss, want[i].baseline_loss);
    ASSERT_TRUE(got[i].predictions && want[i].predictions);
    EXPECT_EQ(got[i].predictions->entropy, want[i].predictions->entropy);
    EXPECT_EQ(got[i].predictions->top1, want[i].predictions->top1);
    // Each window's loss: the chunks of 5 positions straddle the windows of 32.
    ASSERT_TRUE(got[i].windows && want[i].windows);
    EXPECT_EQ(got[i].windows->terms, want[i].windows->terms);
    ASSERT_EQ(got[i].windows->sums.size(), want[i].windows->sums.size());
    double sum = 0;
    std::int64_t terms = 0;
    for (std::size_t w = 0; w < want[i].windows->sums.size(); ++w) {
      EXPECT_NEAR(got[i].windows->sums[w], want[i].windows->sums[w],
                  1e-6 * want[i].windows->sums[w])
          << "window " << w;
      sum += got[i].windows->sums[w];
      terms += got[i].windows->terms[w];
    }
    EXPECT_NEAR(sum / static_cast<double>(terms), got[i].loss, 1e-6 * got[i].loss)
        << "the windows add up to the slice's loss";
  }
}

TEST_F(OutputChunksTest, TheLedgerCountsTheOutputLayerAtItsChunk) {
  const Result<MemoryLedger> whole = MeasureLedger(WideVocabulary(0), *corpus_);
  const Result<MemoryLedger> chunked = MeasureLedger(WideVocabulary(16), *corpus_);
  ASSERT_TRUE(whole.ok() && chunked.ok());
  // The fp32 log-probabilities of 8 x 32 positions, which the loss keeps for the backward.
  const std::int64_t logits = std::int64_t{8} * 32 * 4096 * 4;
  EXPECT_GE(whole->output_layer_bytes, logits);
  EXPECT_LT(chunked->output_layer_bytes, whole->output_layer_bytes / 8);
  // The evaluation held the logits and the log-probabilities at once; in chunks, 16
  // positions' of each.
  EXPECT_LT(chunked->evaluation_peak_bytes, whole->evaluation_peak_bytes - logits / 2);
  EXPECT_LT(chunked->peak_bytes, whole->peak_bytes - logits);
  // The blocks' own activations do not depend on the chunk.
  EXPECT_NEAR(static_cast<double>(chunked->activations_bytes),
              static_cast<double>(whole->activations_bytes), 0.05 * whole->activations_bytes);
  EXPECT_NE(LedgerTable(*whole).find("output layer"), std::string::npos) << LedgerTable(*whole);
  EXPECT_NE(LedgerTable(*chunked).find("in chunks of 16 positions"), std::string::npos)
      << LedgerTable(*chunked);
}

TEST_F(OutputChunksTest, ThePlannerChunksAnOutputLayerLargerThanItsLargestBlockOnly) {
  spec_.planner.precisions = {Precision::kFp32};
  spec_.training.updates = 4;
  JobSpec wide = WideVocabulary(0);
  Result<ChosenPlan> chunked = PlanJob(wide, *corpus_);
  ASSERT_TRUE(chunked.ok()) << chunked.status().message();
  const int chunk = chunked->plan.output_chunk;
  EXPECT_GT(chunk, 0) << ToJson(*chunked).dump();
  EXPECT_LT(chunk, spec_.model.block_size);
  EXPECT_EQ(chunk & (chunk - 1), 0) << "a power of two";
  EXPECT_NE(PlanText(*chunked).find("output layer in chunks of"), std::string::npos)
      << PlanText(*chunked);

  Result<ChosenPlan> whole = PlanJob(spec_, *corpus_);  // 256 classes: smaller than a block
  ASSERT_TRUE(whole.ok()) << whole.status().message();
  EXPECT_EQ(whole->plan.output_chunk, 0) << ToJson(*whole).dump();
}

TEST_F(OutputChunksTest, ParityPassesAChunkedPlanAndRejectsABoundaryThatDropsAToken) {
  for (const Precision precision : {Precision::kFp32, Precision::kBf16}) {
    SCOPED_TRACE(ToString(precision));
    JobSpec spec = WideVocabulary(16);
    spec.plan = {4, 2, {0}, precision};
    spec.plan.output_chunk = 16;
    testing::ExpectParityPassesAndRejects(spec, *corpus_, TrainingFault::kChunkDropsAToken);
  }
}

class OutputChunksCudaTest : public testing::CudaTestOf<OutputChunksTest> {};

// On a GPU (scripts/device-check.sh): the chunks' loss and gradients equal the whole
// logits' there too, in fp32 and bf16 (autocast's CUDA kernels), and the device's peak falls.
TEST_F(OutputChunksCudaTest, LossGradientsAndPeakOnTheGpu) {
  spec_.runtime.device = "cuda";
  ExpectChunksEqualTheWholeLogits();
  const Result<MemoryLedger> whole = MeasureLedger(WideVocabulary(0), *corpus_);
  const Result<MemoryLedger> chunked = MeasureLedger(WideVocabulary(16), *corpus_);
  ASSERT_TRUE(whole.ok() && chunked.ok());
  EXPECT_LT(chunked->peak_bytes, whole->peak_bytes);
  EXPECT_LT(chunked->evaluation_peak_bytes, whole->evaluation_peak_bytes);
}

}  // namespace
}  // namespace trainerd
