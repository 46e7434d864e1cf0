// Data-parallel training on real processes and loopback Gloo: N ranks compute the one-rank
// job. The ranks are this test executable itself, started by trainer-launch, running the
// RankProcess case below; the one-process reference runs in the test.
#include "trainerd/trainer/distributed/data_parallel.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "../support/child_process.h"
#include "../support/temp_dir.h"
#include "../support/tiny_job_spec.h"
#include "models/mlp/mlp_spec.h"
#include "trainerd/trainer/data/dataset.h"
#include "trainerd/trainer/loop/event_sink.h"
#include "trainerd/trainer/loop/trainer.h"
#include "trainerd/trainer/models/resolve_model.h"

namespace trainerd {
namespace {

constexpr int kUpdates = 3;

// The tiny GPT with dropout (its masks must not depend on the rank split either), a batch of
// `effective_batch` over `ranks`, each rank's share in microbatches of `microbatch`.
JobSpec ParallelJob(int effective_batch, int ranks, int microbatch) {
  JobSpec spec = testing::TinyGptJob();
  spec.model.options["dropout"] = 0.1;
  spec.training.effective_batch = effective_batch;
  spec.training.updates = kUpdates;
  spec.distributed.ranks = ranks;
  const int share = ShareOfRank(effective_batch, ranks, 0).count;
  spec.plan.microbatch = microbatch;
  spec.plan.accumulation_steps = (share + microbatch - 1) / microbatch;
  return spec;
}

// Every update's gradients before clipping, then the parameters after the last step.
std::vector<torch::Tensor> TrainAndRecord(const JobSpec& spec, DataParallelGroup* group) {
  Result<std::unique_ptr<Dataset>> corpus = LoadDataset(spec.data, spec.model.block_size, "");
  TORCH_CHECK(corpus.ok(), corpus.status().message());
  NullEventSink discard;
  Trainer trainer(spec, **corpus, &discard, group);
  std::vector<torch::Tensor> recorded;
  trainer.set_before_clip([&](double /*norm*/) {
    for (const torch::Tensor& p : trainer.model().parameters())
      recorded.push_back(p.grad().clone());
  });
  for (int update = 0; update < kUpdates; ++update) trainer.TrainUpdate(update);
  for (const torch::Tensor& p : trainer.model().parameters())
    recorded.push_back(p.detach().clone());
  return recorded;
}

// BatchNorm's running statistics are each rank's own and never synchronised: data-parallel
// training of such a model would release rank 0's, another job than the one-process one.
TEST(DataParallelBatchNormTest, ABatchNormModelIsRefusedWithMoreThanOneRank) {
  JobSpec spec = testing::TinyGptJob();
  spec.model = MlpModelSpec({16, 2, /*batch_norm=*/true, 0.0}, spec.model.block_size);
  Result<std::unique_ptr<Dataset>> corpus = LoadDataset(spec.data, spec.model.block_size, "");
  ASSERT_TRUE(corpus.ok()) << corpus.status().message();
  spec.distributed.ranks = 2;
  const Status refused = ResolveModel(&spec, **corpus);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("BatchNorm"), std::string::npos) << refused.message();
  EXPECT_NE(refused.message().find("distributed.ranks: 2"), std::string::npos) << refused.message();

  spec.distributed.ranks = 1;
  EXPECT_TRUE(ResolveModel(&spec, **corpus).ok());
  spec.model.options["batch_norm"] = false;  // control: the same job without BatchNorm
  spec.distributed.ranks = 2;
  EXPECT_TRUE(ResolveModel(&spec, **corpus).ok());
}

// A rank of the jobs below: runs only when trainer-launch started this executable as one.
TEST(DataParallelRankProcess, TrainsItsShareAndRankZeroWritesWhatItSaw) {
  const char* output = std::getenv("TRAINERD_TEST_RANK_OUTPUT");
  if (output == nullptr)
    GTEST_SKIP() << "a rank started by DataParallelTest through trainer-launch";
  const JobSpec spec = ParallelJob(std::atoi(std::getenv("TRAINERD_TEST_BATCH")),
                                   std::atoi(std::getenv("WORLD_SIZE")),
                                   std::atoi(std::getenv("TRAINERD_TEST_MICROBATCH")));
  torch::set_num_threads(1);
  Result<RankEnvironment> env = RankEnvironmentFrom(::getenv);
  ASSERT_TRUE(env.ok()) << env.status().message();
  Result<std::unique_ptr<DataParallelGroup>> group =
      DataParallelGroup::Join(*env, torch::kCPU, /*timeout_seconds=*/60);
  ASSERT_TRUE(group.ok()) << group.status().message();
  const std::vector<torch::Tensor> recorded = TrainAndRecord(spec, group->get());
  if (env->rank == 0) torch::save(recorded, output);
}

class DataParallelTest : public ::testing::Test {
 protected:
  // What rank 0 of `ranks` processes recorded.
  std::vector<torch::Tensor> RunRanks(int ranks, int effective_batch, int microbatch) {
    const std::string output = dir_.File("ranks.pt");
    ::setenv("TRAINERD_TEST_RANK_OUTPUT", output.c_str(), 1);
    ::setenv("TRAINERD_TEST_BATCH", std::to_string(effective_batch).c_str(), 1);
    ::setenv("TRAINERD_TEST_MICROBATCH", std::to_string(microbatch).c_str(), 1);
    int code = -1;
    const std::string log =
        testing::RunToEnd({TRAINER_LAUNCH_PATH, "--ranks", std::to_string(ranks), "--",
                           std::filesystem::read_symlink("/proc/self/exe").string(),
                           "--gtest_filter=DataParallelRankProcess.*"},
                          &code);
    ::unsetenv("TRAINERD_TEST_RANK_OUTPUT");
    EXPECT_EQ(code, 0) << log;
    std::vector<torch::Tensor> recorded;
    if (code == 0) torch::load(recorded, output);
    return recorded;
  }

  // The ranks' gradients against the reference's: every update's, each element within
  // 1e-6 (and 1e-5 of the tensor's largest magnitude); then the parameters after the last
  // step within 1e-5 (AdamW divides by the root of the second moment, so a near-zero
  // gradient's rounding moves its parameter by up to the learning rate's order).
  static void ExpectSame(const std::vector<torch::Tensor>& ranks,
                         const std::vector<torch::Tensor>& reference) {
    ASSERT_EQ(ranks.size(), reference.size());
    const std::size_t gradients = reference.size() / (kUpdates + 1) * kUpdates;
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      const double difference = (ranks[i] - reference[i]).abs().max().item<double>();
      const double scale = reference[i].abs().max().item<double>();
      if (i < gradients) {
        EXPECT_LE(difference, 1e-6) << "gradient " << i;
        EXPECT_LE(difference, 1e-5 * scale) << "gradient " << i;
      } else {
        EXPECT_LE(difference, 1e-5) << "parameter " << i - gradients;
      }
    }
  }

  testing::TempDir dir_;
};

TEST_F(DataParallelTest, TwoRanksOfSixteenComputeOneRankOfThirtyTwo) {
  const auto reference = TrainAndRecord(ParallelJob(32, 1, 32), nullptr);
  ExpectSame(RunRanks(2, 32, 16), reference);
}

TEST_F(DataParallelTest, TwoRanksAccumulatingMicrobatchesComputeOneRankOfThirtyTwo) {
  const auto reference = TrainAndRecord(ParallelJob(32, 1, 32), nullptr);
  ExpectSame(RunRanks(2, 32, 5), reference);  // 16 per rank as 5 + 5 + 5 + 1
}

TEST_F(DataParallelTest, UnevenSharesComputeTheOneRankJob) {
  const auto reference = TrainAndRecord(ParallelJob(13, 1, 13), nullptr);
  ExpectSame(RunRanks(3, 13, 2), reference);  // shares 5, 4, 4
}

TEST(RankShareTest, SharesAreContiguousAndCoverTheBatchOnce) {
  int next = 0;
  for (int rank = 0; rank < 3; ++rank) {
    const RankShare share = ShareOfRank(13, 3, rank);
    EXPECT_EQ(share.offset, next);
    next += share.count;
  }
  EXPECT_EQ(next, 13);
  EXPECT_EQ(ShareOfRank(13, 3, 0).count, 5);
  EXPECT_EQ(ShareOfRank(13, 3, 2).count, 4);
}

}  // namespace
}  // namespace trainerd
