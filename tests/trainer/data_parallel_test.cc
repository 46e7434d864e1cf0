// Data-parallel training on real processes and loopback Gloo: N ranks compute the one-rank
// job. The ranks are this test executable itself, started by trainer-launch, running the
// RankProcess case below; the one-process reference runs in the test.
#include "trainerd/trainer/distributed/data_parallel.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "../support/child_process.h"
#include "../support/temp_dir.h"
#include "../support/tiny_job_spec.h"
#include "models/mlp/mlp_spec.h"
#include "trainerd/trainer/data/dataset.h"
#include "trainerd/trainer/distributed/state_sharding.h"
#include "trainerd/trainer/loop/event_sink.h"
#include "trainerd/trainer/loop/model_state_bytes.h"
#include "trainerd/trainer/loop/trainer.h"
#include "trainerd/trainer/models/resolve_model.h"

namespace trainerd {
namespace {

constexpr int kUpdates = 3;

// The tiny GPT with dropout (its masks must not depend on the rank split either), a batch of
// `effective_batch` over `ranks`, each rank's share in microbatches of `microbatch`, the
// model's state sharded by ZeRO stage `zero_stage`.
JobSpec ParallelJob(int effective_batch, int ranks, int microbatch, int zero_stage = 0) {
  JobSpec spec = testing::TinyGptJob();
  spec.model.options["dropout"] = 0.1;
  spec.training.effective_batch = effective_batch;
  spec.training.updates = kUpdates;
  spec.distributed.ranks = ranks;
  const int share = ShareOfRank(effective_batch, ranks, 0).count;
  spec.plan.microbatch = microbatch;
  spec.plan.accumulation_steps = (share + microbatch - 1) / microbatch;
  spec.plan.zero_stage = zero_stage;
  return spec;
}

// Every update's gradients before clipping (an empty tensor for one this rank does not hold)
// and their norm, then the parameters after the last step, then the bytes of the optimizer's
// state.
std::vector<torch::Tensor> TrainAndRecord(const JobSpec& spec, DataParallelGroup* group) {
  Result<std::unique_ptr<Dataset>> corpus = LoadDataset(spec.data, spec.model.block_size, "");
  TORCH_CHECK(corpus.ok(), corpus.status().message());
  NullEventSink discard;
  Trainer trainer(spec, **corpus, &discard, group);
  std::vector<torch::Tensor> recorded;
  trainer.set_before_clip([&](double norm) {
    for (const torch::Tensor& p : trainer.model().parameters())
      recorded.push_back(p.grad().defined() ? p.grad().clone() : torch::empty({0}));
    recorded.push_back(torch::tensor({norm}, torch::kDouble));
  });
  for (int update = 0; update < kUpdates; ++update) trainer.TrainUpdate(update);
  for (const torch::Tensor& p : trainer.model().parameters())
    recorded.push_back(p.detach().clone());
  recorded.push_back(
      torch::tensor({AdamWStateBytes(trainer.model_state().optimizer())}, torch::kLong));
  return recorded;
}

// Trains 4 updates of `spec` and returns the parameters after the last; given `group`, as a
// run with the plan's ZeRO stage `saved_by` stopped after update 2 (its checkpoint written),
// then resumed by a run whose plan has `resumed_by`.
std::vector<torch::Tensor> TrainThroughACheckpoint(JobSpec spec, DataParallelGroup* group,
                                                   const std::string& dir, int saved_by,
                                                   int resumed_by) {
  spec.training.updates = 4;
  Result<std::unique_ptr<Dataset>> corpus = LoadDataset(spec.data, spec.model.block_size, "");
  TORCH_CHECK(corpus.ok(), corpus.status().message());
  NullEventSink discard;
  TrainerOptions options;
  options.checkpoint_path = dir + "/checkpoint.pt";
  options.model_path = dir + "/model.pt";
  options.peak_flops_cache = dir + "/peak_flops.json";
  if (group == nullptr) {
    Trainer trainer(spec, **corpus, &discard);
    TORCH_CHECK(trainer.Run(options).ok());
    return trainer.model().parameters();
  }
  std::atomic<bool> stop{false};
  options.stop_requested = &stop;
  spec.plan.zero_stage = saved_by;
  {
    Trainer trainer(spec, **corpus, &discard, group);
    int updates = 0;
    trainer.set_before_clip([&](double /*norm*/) { stop = ++updates == 2; });
    const Result<TrainOutcome> stopped = trainer.Run(options);
    TORCH_CHECK(stopped.ok() && stopped->kind == TrainOutcome::Kind::kInterrupted &&
                stopped->updates_done == 2);
  }
  group->Sum(0);  // every rank waits for rank 0's checkpoint
  spec.plan.zero_stage = resumed_by;
  options.stop_requested = nullptr;
  options.resume = Resume::kRequired;
  Trainer trainer(spec, **corpus, &discard, group);
  const Result<TrainOutcome> finished = trainer.Run(options);
  TORCH_CHECK(finished.ok() && finished->kind == TrainOutcome::Kind::kFinished,
              finished.ok() ? finished->message : finished.status().message());
  return trainer.model().parameters();
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
                                   std::atoi(std::getenv("TRAINERD_TEST_MICROBATCH")),
                                   std::atoi(std::getenv("TRAINERD_TEST_ZERO_STAGE")));
  torch::set_num_threads(1);
  Result<RankEnvironment> env = RankEnvironmentFrom(::getenv);
  ASSERT_TRUE(env.ok()) << env.status().message();
  Result<std::unique_ptr<DataParallelGroup>> group =
      DataParallelGroup::Join(*env, torch::kCPU, /*timeout_seconds=*/60);
  ASSERT_TRUE(group.ok()) << group.status().message();
  const char* saved_by = std::getenv("TRAINERD_TEST_SAVED_BY");
  const std::vector<torch::Tensor> recorded =
      saved_by == nullptr
          ? TrainAndRecord(spec, group->get())
          : TrainThroughACheckpoint(spec, group->get(), std::getenv("TRAINERD_TEST_DIR"),
                                    std::atoi(saved_by),
                                    std::atoi(std::getenv("TRAINERD_TEST_RESUMED_BY")));
  if (env->rank == 0) torch::save(recorded, output);
}

class DataParallelTest : public ::testing::Test {
 protected:
  // What rank 0 of `ranks` processes recorded.
  std::vector<torch::Tensor> RunRanks(int ranks, int effective_batch, int microbatch,
                                      int zero_stage = 0) {
    const std::string output = dir_.File("ranks.pt");
    ::setenv("TRAINERD_TEST_RANK_OUTPUT", output.c_str(), 1);
    ::setenv("TRAINERD_TEST_ZERO_STAGE", std::to_string(zero_stage).c_str(), 1);
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

  // The ranks' gradients against the reference's: every update's that rank 0 holds, each
  // element within 1e-6 (and 1e-5 of the tensor's largest magnitude), and their norm within
  // 1e-6 of it; then the parameters after the last step within 1e-5 (AdamW divides by the
  // root of the second moment, so a near-zero gradient's rounding moves its parameter by up
  // to the learning rate's order). Returns how many gradients rank 0 did not hold.
  static int ExpectSame(const std::vector<torch::Tensor>& ranks,
                        const std::vector<torch::Tensor>& reference) {
    EXPECT_EQ(ranks.size(), reference.size());
    if (ranks.size() != reference.size()) return 0;
    const std::size_t parameters = reference.size() / (kUpdates + 1) - 1;
    const std::size_t recorded_updates = (parameters + 1) * kUpdates;
    int not_held = 0;
    for (std::size_t i = 0; i + 1 < ranks.size(); ++i) {
      if (i < recorded_updates && i % (parameters + 1) == parameters) {
        EXPECT_NEAR(ranks[i].item<double>(), reference[i].item<double>(),
                    1e-6 * reference[i].item<double>())
            << "norm of update " << i / (parameters + 1);
        continue;
      }
      if (i < recorded_updates && ranks[i].numel() == 0) {
        ++not_held;
        continue;
      }
      const double difference = (ranks[i] - reference[i]).abs().max().item<double>();
      const double scale = reference[i].abs().max().item<double>();
      if (i < recorded_updates) {
        EXPECT_LE(difference, 1e-6) << "gradient " << i;
        EXPECT_LE(difference, 1e-5 * scale) << "gradient " << i;
      } else {
        EXPECT_LE(difference, 1e-5) << "parameter " << i - recorded_updates;
      }
    }
    return not_held;
  }

  // The bytes of optimizer state TrainAndRecord recorded.
  static std::int64_t StateBytes(const std::vector<torch::Tensor>& recorded) {
    return recorded.empty() ? 0 : recorded.back().item<std::int64_t>();
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

// ZeRO stage 1: each rank keeps and steps its shard of AdamW's state, every rank still
// holds every gradient, and the result is the one-rank job's.
TEST_F(DataParallelTest, TwoRanksShardingTheOptimizerStateComputeOneRank) {
  const auto reference = TrainAndRecord(ParallelJob(32, 1, 32), nullptr);
  const auto sharded = RunRanks(2, 32, 5, /*zero_stage=*/1);
  EXPECT_EQ(ExpectSame(sharded, reference), 0);
  EXPECT_LT(StateBytes(sharded), StateBytes(reference) * 3 / 4);
  EXPECT_GT(StateBytes(sharded), StateBytes(reference) / 4);
}

// ZeRO stage 2: each gradient is summed into its owner's after every microbatch (16 per rank as
// 5 + 5 + 5 + 1) and the other ranks drop theirs; the result is still the one-rank job's.
TEST_F(DataParallelTest, TwoRanksShardingGradientsAndOptimizerStateComputeOneRank) {
  const auto reference = TrainAndRecord(ParallelJob(32, 1, 32), nullptr);
  const auto sharded = RunRanks(2, 32, 5, /*zero_stage=*/2);
  const std::size_t parameters = reference.size() / (kUpdates + 1) - 1;
  const int not_held = ExpectSame(sharded, reference);
  EXPECT_GT(not_held, 0);  // rank 0 holds no gradient of rank 1's shard ...
  EXPECT_LT(not_held, static_cast<int>(parameters * kUpdates));  // ... but those of its own
  EXPECT_LT(StateBytes(sharded), StateBytes(reference) * 3 / 4);
}

// A sharded plan's checkpoint holds every rank's shard of AdamW's state, in the file an
// unsharded plan writes: either plan resumes it and trains the one-rank job.
TEST_F(DataParallelTest, ShardedAndUnshardedPlansResumeEachOthersCheckpoints) {
  const auto reference =
      TrainThroughACheckpoint(ParallelJob(32, 1, 32), nullptr, dir_.File(""), 0, 0);
  for (const auto& [saved_by, resumed_by] : {std::pair{2, 0}, std::pair{0, 2}, std::pair{1, 1}}) {
    SCOPED_TRACE("saved by stage " + std::to_string(saved_by) + ", resumed by stage " +
                 std::to_string(resumed_by));
    const std::string run =
        dir_.File("run" + std::to_string(saved_by) + std::to_string(resumed_by));
    std::filesystem::create_directories(run);
    ::setenv("TRAINERD_TEST_DIR", run.c_str(), 1);
    ::setenv("TRAINERD_TEST_SAVED_BY", std::to_string(saved_by).c_str(), 1);
    ::setenv("TRAINERD_TEST_RESUMED_BY", std::to_string(resumed_by).c_str(), 1);
    const auto resumed = RunRanks(2, 32, 5);
    ::unsetenv("TRAINERD_TEST_SAVED_BY");
    ASSERT_EQ(resumed.size(), reference.size());
    for (std::size_t i = 0; i < resumed.size(); ++i) {
      EXPECT_LE((resumed[i] - reference[i]).abs().max().item<double>(), 1e-5) << "parameter " << i;
    }
  }
}

TEST_F(DataParallelTest, ThreeRanksOfUnevenSharesShardingGradientsComputeTheOneRankJob) {
  const auto reference = TrainAndRecord(ParallelJob(13, 1, 13), nullptr);
  EXPECT_GT(ExpectSame(RunRanks(3, 13, 2, /*zero_stage=*/2), reference), 0);
}

TEST(ShardOwnersTest, ShardsAreContiguousInOrderAndBalancedByElements) {
  const std::vector<std::int64_t> numels = {10, 10, 10, 10, 40, 5, 5, 10};  // 100 elements
  const std::vector<int> owners = ShardOwners(numels, 2);
  EXPECT_EQ(owners, (std::vector<int>{0, 0, 0, 0, 1, 1, 1, 1}));
  EXPECT_EQ(ShardOwners(numels, 1), std::vector<int>(numels.size(), 0));
  std::vector<torch::Tensor> parameters;
  for (std::int64_t n : numels) parameters.push_back(torch::zeros({n}).requires_grad_());
  EXPECT_EQ(BytesOutsideLargestShard(parameters, 2), 40 * 4);  // rank 1 holds 60 of 100
  EXPECT_EQ(BytesOutsideLargestShard(parameters, 1), 0);
  parameters[4].requires_grad_(false);  // frozen: no gradient, no optimizer state to shard
  EXPECT_EQ(BytesOutsideLargestShard(parameters, 2), 20 * 4);  // rank 0's 40 of 60 trainable
  const std::vector<int> four = ShardOwners(numels, 4);
  EXPECT_TRUE(std::is_sorted(four.begin(), four.end()));
  EXPECT_EQ(four.front(), 0);
  EXPECT_EQ(four.back(), 3);
  // More ranks than parameters: some ranks own nothing, none owns past the last rank.
  const std::vector<int> many = ShardOwners({7, 7}, 5);
  EXPECT_LT(*std::max_element(many.begin(), many.end()), 5);
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
