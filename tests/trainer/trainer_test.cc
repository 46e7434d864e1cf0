#include "trainerd/trainer/loop/trainer.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <fstream>

#include "../support/cuda_test.h"
#include "../support/recording_sink.h"
#include "../support/temp_dir.h"
#include "../support/tiny_job_test.h"
#include "trainerd/trainer/semantics/lr_schedule.h"

namespace trainerd {
namespace {

using testing::RecordingSink;

// Raises the stop flag once update `stop_after` has been reported, as a SIGTERM would.
class StoppingSink : public RecordingSink {
 public:
  StoppingSink(std::atomic<bool>* stop, int stop_after) : stop_(stop), stop_after_(stop_after) {}
  void Emit(const WorkerEvent& event) override {
    RecordingSink::Emit(event);
    const auto* update = std::get_if<UpdateEvent>(&event);
    if (update != nullptr && update->update == stop_after_) stop_->store(true);
  }

 private:
  std::atomic<bool>* stop_;
  int stop_after_;
};

class TrainerTest : public testing::TinyJobTest {
 protected:
  TrainerOptions Options() const {
    TrainerOptions options;
    options.checkpoint_path = dir_.File("checkpoint.pt");
    options.model_path = dir_.File("model.pt");
    return options;
  }
  // For an uninterrupted reference run beside the run under test.
  TrainerOptions ReferenceOptions() const {
    TrainerOptions options;
    options.checkpoint_path = dir_.File("reference.pt");
    options.model_path = dir_.File("reference-model.pt");
    return options;
  }

  testing::TempDir dir_;
};

TEST_F(TrainerTest, ThirtyUpdatesLowerTheTrainingLoss) {
  RecordingSink sink;
  Trainer trainer(spec_, *corpus_, &sink);
  Result<TrainOutcome> outcome = trainer.Run(Options());
  ASSERT_TRUE(outcome.ok()) << outcome.status().message();
  EXPECT_EQ(outcome->kind, TrainOutcome::Kind::kFinished);
  EXPECT_EQ(outcome->updates_done, 30);
  const auto updates = sink.Of("update");
  ASSERT_EQ(updates.size(), 30u);
  const double first = updates.front()["loss"], last = updates.back()["loss"];
  EXPECT_GT(first, 5.0);  // about ln(256) = 5.55 for an untrained byte model
  EXPECT_LT(last, first - 1.0) << "first " << first << " last " << last;
  EXPECT_EQ(outcome->model_sha256.size(), 64u);
  EXPECT_TRUE(std::filesystem::exists(Options().model_path));
}

TEST_F(TrainerTest, EventsFollowTheDocumentedSchema) {
  spec_.training.updates = 4;
  spec_.training.eval_interval = 2;
  spec_.training.checkpoint_interval = 3;
  RecordingSink sink;
  Trainer trainer(spec_, *corpus_, &sink);
  ASSERT_TRUE(trainer.Run(Options()).ok());
  ASSERT_FALSE(sink.events.empty());
  const auto& start = sink.events.front();
  EXPECT_EQ(start["event"], "start");
  EXPECT_EQ(start["plan"]["microbatch"], 8);
  EXPECT_EQ(start["plan"]["accumulation_steps"], 1);
  EXPECT_EQ(start["data"]["fingerprint"], corpus_->fingerprint());
  EXPECT_EQ(start["device_info"]["type"], "cpu");
  EXPECT_GT(start["device_info"]["total_memory_bytes"].get<std::int64_t>(), 1LL << 30);
  EXPECT_FALSE(start["device_info"]["name"].get<std::string>().empty());
  for (const char* key : {"loss", "lr", "grad_norm", "samples_per_second", "eta_seconds"}) {
    EXPECT_TRUE(sink.Of("update")[0].contains(key)) << key;
  }
  EXPECT_EQ(sink.Of("eval").size(), 2u);        // updates 2 and 4
  ASSERT_EQ(sink.Of("checkpoint").size(), 2u);  // update 3 (interval) and 4 (final)
  EXPECT_EQ(sink.Of("checkpoint")[0]["reason"], "interval");
  EXPECT_EQ(sink.Of("eval")[0]["slices"].size(), 2u);
  const auto& finish = sink.events.back();
  EXPECT_EQ(finish["event"], "finish");
  EXPECT_TRUE(finish.contains("throughput_method"));
  EXPECT_EQ(finish["reserved_peak_bytes"], finish["peak_bytes"]);  // the CPU caches nothing
  EXPECT_EQ(finish["eval_slices"].size(), 2u);
}

// LibTorch 2.x's zero_grad() releases gradients, 1.13's zeroes them: the loop picks zeroing
// under both, so the memory an update holds (and the ledger) is the same whichever builds it.
TEST_F(TrainerTest, EveryUpdateAfterTheFirstStartsFromZeroedGradientsNotReleasedOnes) {
  RecordingSink sink;
  Trainer trainer(spec_, *corpus_, &sink);
  trainer.TrainUpdate(0);
  int checked = 0;
  trainer.TrainUpdate(1, [&](std::size_t index) {
    if (index != 0) return;
    for (const auto& p : trainer.model().parameters()) {
      ASSERT_TRUE(p.grad().defined());
      EXPECT_EQ(p.grad().abs().max().item<double>(), 0.0);
      ++checked;
    }
  });
  EXPECT_EQ(checked, static_cast<int>(trainer.model().parameters().size()));
}

TEST_F(TrainerTest, InterruptedAndResumedRunEqualsUninterruptedRun) {
  spec_.model.options["dropout"] = 0.1;  // the RNG state must be restored too
  spec_.training.updates = 10;
  RecordingSink reference_sink;
  Trainer reference(spec_, *corpus_, &reference_sink);
  ASSERT_TRUE(reference.Run(ReferenceOptions()).ok());

  std::atomic<bool> stop{false};
  StoppingSink first_sink(&stop, /*stop_after=*/4);
  TrainerOptions options = Options();
  options.stop_requested = &stop;
  {
    Trainer first(spec_, *corpus_, &first_sink);
    Result<TrainOutcome> interrupted = first.Run(options);
    ASSERT_TRUE(interrupted.ok()) << interrupted.status().message();
    EXPECT_EQ(interrupted->kind, TrainOutcome::Kind::kInterrupted);
    EXPECT_EQ(interrupted->updates_done, 4);
    EXPECT_EQ(first_sink.Of("checkpoint").back()["reason"], "signal");
  }
  torch::manual_seed(999);  // disturb the global RNG: the checkpoint must restore it
  stop = false;
  RecordingSink second_sink;
  Trainer second(spec_, *corpus_, &second_sink);
  options.resume = trainerd::Resume::kRequired;
  Result<TrainOutcome> resumed = second.Run(options);
  ASSERT_TRUE(resumed.ok()) << resumed.status().message();
  EXPECT_EQ(resumed->kind, TrainOutcome::Kind::kFinished);
  EXPECT_EQ(second_sink.Of("update").size(), 6u);  // updates 5..10 only
  EXPECT_EQ(second_sink.events.front()["resumed_from_update"], 4);

  auto expected = reference.model().named_parameters();
  auto actual = second.model().named_parameters();
  ASSERT_EQ(expected.size(), actual.size());
  for (const auto& item : expected) {
    EXPECT_TRUE(torch::equal(item.value(), actual[item.key()])) << item.key();
  }
  EXPECT_EQ(reference_sink.Of("update").back()["loss"], second_sink.Of("update").back()["loss"]);
}

class CudaTrainerTest : public testing::CudaTestOf<TrainerTest> {
 protected:
  void SetUp() override {
    CudaTestOf<TrainerTest>::SetUp();
    if (IsSkipped()) return;
    spec_.runtime.device = "cuda";
    spec_.model.options["dropout"] = 0.1;  // the CUDA generator's state matters
    spec_.training.updates = 10;
  }

  // Trains on CUDA until update 4 has been reported, then stops with a checkpoint.
  void TrainFourUpdatesOnCuda(const TrainerOptions& options) {
    std::atomic<bool> stop{false};
    StoppingSink sink(&stop, /*stop_after=*/4);
    TrainerOptions stopping = options;
    stopping.stop_requested = &stop;
    Trainer first(spec_, *corpus_, &sink);
    Result<TrainOutcome> interrupted = first.Run(stopping);
    ASSERT_TRUE(interrupted.ok()) << interrupted.status().message();
    ASSERT_EQ(interrupted->kind, TrainOutcome::Kind::kInterrupted);
  }
};

TEST_F(CudaTrainerTest, AnInterruptedAndResumedRunOnCudaEqualsTheUninterruptedRun) {
  RecordingSink reference_sink;
  Trainer reference(spec_, *corpus_, &reference_sink);
  ASSERT_TRUE(reference.Run(ReferenceOptions()).ok());

  TrainFourUpdatesOnCuda(Options());
  torch::manual_seed(999);  // disturb the CPU and CUDA generators: the checkpoint restores both
  RecordingSink sink;
  Trainer second(spec_, *corpus_, &sink);
  TrainerOptions options = Options();
  options.resume = Resume::kRequired;
  ASSERT_TRUE(second.Run(options).ok());
  EXPECT_TRUE(sink.JobWarnings().empty());
  auto expected = reference.model().named_parameters();
  auto actual = second.model().named_parameters();
  for (const auto& item : expected) {
    // CUDA reductions may differ in the last bits between runs; other dropout masks would
    // move parameters by about the learning rate.
    EXPECT_LE((item.value() - actual[item.key()]).abs().max().item<double>(), 1e-5) << item.key();
  }
}

TEST_F(CudaTrainerTest, ACheckpointWrittenOnCudaResumesOnTheCpuWithAWarning) {
  TrainFourUpdatesOnCuda(Options());
  spec_.runtime.device = "cpu";
  RecordingSink sink;
  Trainer second(spec_, *corpus_, &sink);
  TrainerOptions options = Options();
  options.resume = Resume::kRequired;
  Result<TrainOutcome> resumed = second.Run(options);
  ASSERT_TRUE(resumed.ok()) << resumed.status().message();
  EXPECT_EQ(resumed->kind, TrainOutcome::Kind::kFinished);
  EXPECT_EQ(sink.events.front()["resumed_from_update"], 4);
  ASSERT_EQ(sink.JobWarnings().size(), 1u);
  EXPECT_EQ(sink.JobWarnings()[0]["kind"], "checkpoint_device_changed");
}

TEST_F(TrainerTest, ResumeRefusesACheckpointOfAnotherJob) {
  spec_.training.updates = 2;
  RecordingSink sink;
  ASSERT_TRUE(Trainer(spec_, *corpus_, &sink).Run(Options()).ok());
  JobSpec other = spec_;
  other.training.seed = 8;
  TrainerOptions options = Options();
  options.resume = trainerd::Resume::kRequired;
  Result<TrainOutcome> outcome = Trainer(other, *corpus_, &sink).Run(options);
  ASSERT_FALSE(outcome.ok());
  EXPECT_EQ(outcome.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(outcome.status().message().find("another job"), std::string::npos);
}

TEST_F(TrainerTest, ResumeIfCompatibleStartsAfreshOverAnotherJobsCheckpoint) {
  spec_.training.updates = 2;
  RecordingSink sink;
  ASSERT_TRUE(Trainer(spec_, *corpus_, &sink).Run(Options()).ok());
  JobSpec other = spec_;
  other.training.seed = 8;
  TrainerOptions options = Options();
  options.resume = Resume::kIfCompatible;
  RecordingSink other_sink;
  Result<TrainOutcome> outcome = Trainer(other, *corpus_, &other_sink).Run(options);
  ASSERT_TRUE(outcome.ok()) << outcome.status().message();
  EXPECT_EQ(outcome->kind, TrainOutcome::Kind::kFinished);
  EXPECT_EQ(other_sink.events.front()["resumed_from_update"], 0);
  ASSERT_EQ(other_sink.JobWarnings().size(), 1u);
  EXPECT_EQ(other_sink.JobWarnings()[0]["kind"], "checkpoint_ignored");
  EXPECT_EQ(other_sink.Of("update").size(), 2u);

  // Its own checkpoint (written at the end of the run above) is resumed: nothing left to do.
  RecordingSink again_sink;
  Result<TrainOutcome> again = Trainer(other, *corpus_, &again_sink).Run(options);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again_sink.events.front()["resumed_from_update"], 2);
  EXPECT_TRUE(again_sink.JobWarnings().empty());
}

// A worker whose daemon died after the job finished is run again on the job's final
// checkpoint: it trains nothing, and its finish event says so instead of inventing figures.
TEST_F(TrainerTest, ResumedAtTheLastUpdateReportsRealEvalLossesAndNoThroughputOrTrainLoss) {
  TrainerOptions options = Options();
  RecordingSink first_sink;
  ASSERT_TRUE(Trainer(spec_, *corpus_, &first_sink).Run(options).ok());
  const nlohmann::json first = first_sink.Of("finish").at(0);

  options.resume = Resume::kIfCompatible;
  RecordingSink sink;
  Result<TrainOutcome> again = Trainer(spec_, *corpus_, &sink).Run(options);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_TRUE(sink.Of("update").empty());
  const nlohmann::json finish = sink.Of("finish").at(0);
  EXPECT_EQ(finish["updates"], spec_.training.updates);
  EXPECT_EQ(finish["updates_trained"], 0);
  EXPECT_TRUE(finish["final_train_loss"].is_null());
  EXPECT_TRUE(finish["samples_per_second"].is_null());
  EXPECT_TRUE(finish["tokens_per_second"].is_null());
  EXPECT_TRUE(finish["mfu"].is_null());
  EXPECT_FALSE(finish["measurement_valid"].get<bool>());
  // The same model, evaluated: the losses of the run that trained it.
  EXPECT_EQ(finish["model_sha256"], first["model_sha256"]);
  ASSERT_EQ(finish["eval_slices"].size(), first["eval_slices"].size());
  for (std::size_t i = 0; i < first["eval_slices"].size(); ++i) {
    EXPECT_NEAR(finish["eval_slices"][i]["loss"].get<double>(),
                first["eval_slices"][i]["loss"].get<double>(), 1e-6);
  }
  EXPECT_EQ(first["updates_trained"], spec_.training.updates);
}

TEST_F(TrainerTest, ResumeReportsMissingAndCorruptCheckpoints) {
  RecordingSink sink;
  TrainerOptions options = Options();
  options.resume = trainerd::Resume::kRequired;
  Result<TrainOutcome> missing = Trainer(spec_, *corpus_, &sink).Run(options);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Status::Code::kNotFound);

  std::ofstream(options.checkpoint_path) << "not a checkpoint";
  Result<TrainOutcome> corrupt = Trainer(spec_, *corpus_, &sink).Run(options);
  ASSERT_FALSE(corrupt.ok());
  EXPECT_EQ(corrupt.status().code(), Status::Code::kCorruption);
  EXPECT_NE(corrupt.status().message().find("checkpoint.pt"), std::string::npos);
}

// The daemon resumes with --resume-if-compatible: a damaged checkpoint must not fail every
// attempt of every night. It is kept aside, byte for byte, and the job starts afresh.
TEST_F(TrainerTest, ResumeIfCompatibleKeepsACorruptCheckpointAsideAndStartsAfresh) {
  TrainerOptions options = Options();
  options.resume = Resume::kIfCompatible;
  std::ofstream(options.checkpoint_path) << "not a checkpoint";
  RecordingSink sink;
  Result<TrainOutcome> outcome = Trainer(spec_, *corpus_, &sink).Run(options);
  ASSERT_TRUE(outcome.ok()) << outcome.status().message();
  EXPECT_EQ(outcome->kind, TrainOutcome::Kind::kFinished);
  EXPECT_EQ(sink.events.front()["resumed_from_update"], 0);
  ASSERT_EQ(sink.JobWarnings().size(), 1u);
  EXPECT_EQ(sink.JobWarnings()[0]["kind"], "checkpoint_corrupt");
  EXPECT_EQ(testing::ReadFile(options.checkpoint_path + ".corrupt"), "not a checkpoint");
  EXPECT_EQ(sink.Of("update").size(), static_cast<std::size_t>(spec_.training.updates));
}

TEST(LearningRateTest, WarmupThenCosineToTheMinimum) {
  OptimizerSpec optimizer;
  optimizer.lr = 1.0;
  ScheduleSpec schedule;
  schedule.warmup_updates = 4;
  schedule.min_lr = 0.1;
  EXPECT_DOUBLE_EQ(LearningRateAt(optimizer, schedule, 0, 20), 0.25);
  EXPECT_DOUBLE_EQ(LearningRateAt(optimizer, schedule, 3, 20), 1.0);
  EXPECT_DOUBLE_EQ(LearningRateAt(optimizer, schedule, 4, 20), 1.0);
  EXPECT_NEAR(LearningRateAt(optimizer, schedule, 19, 20), 0.1, 1e-12);
  double previous = 2.0;
  for (int u = 4; u < 20; ++u) {
    const double lr = LearningRateAt(optimizer, schedule, u, 20);
    EXPECT_LE(lr, previous);
    previous = lr;
  }
}

}  // namespace
}  // namespace trainerd
