#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <fstream>

#include "../support/cuda_test.h"
#include "../support/temp_dir.h"
#include "../support/tiny_job_test.h"
#include "trainerd/trainer/device/machine.h"
#include "trainerd/trainer/loop/leak_detector.h"
#include "trainerd/trainer/loop/throughput.h"
#include "trainerd/trainer/loop/trainer.h"
#include "trainerd/trainer/models/build_model.h"

namespace trainerd {
namespace {

class Discard : public EventSink {
 public:
  void Emit(const WorkerEvent& /*event*/) override {}
};

TEST(LeakDetectorTest, FlatMemoryIsNoLeakSustainedGrowthIs) {
  LeakDetector flat;
  for (int i = 0; i < 50; ++i) EXPECT_FALSE(flat.Observe(1000 + (i == 1 ? 500 : 0)));
  LeakDetector growing({/*warmup_samples=*/2, /*sustained=*/3, /*tolerance_bytes=*/100});
  bool leak = false;
  int samples = 0;
  for (std::int64_t live = 1000; !leak && samples < 20; live += 80, ++samples)
    leak = growing.Observe(live);
  EXPECT_TRUE(leak);
  EXPECT_GT(growing.growth_bytes(), 100);
  EXPECT_LT(samples, 10);
}

class TrainerLeakTest : public testing::TinyJobTest {
 protected:
  void SetUp() override {
    TinyJobTest::SetUp();
    spec_.training.updates = 15;
  }
  TrainerOptions Options() {
    TrainerOptions options;
    options.checkpoint_path = dir_.File("c.pt");
    options.model_path = dir_.File("m.pt");
    options.leak_detection.tolerance_bytes = 64 << 10;
    return options;
  }
  testing::TempDir dir_;
};

TEST_F(TrainerLeakTest, ARetainedLossGraphIsCaughtAndStopsTheRun) {
  Discard discard;
  Trainer trainer(spec_, *corpus_, &discard);
  TrainerOptions options = Options();
  options.test_only_retain_loss_graph = true;
  Result<TrainOutcome> outcome = trainer.Run(options);
  ASSERT_TRUE(outcome.ok()) << outcome.status().message();
  EXPECT_EQ(outcome->kind, TrainOutcome::Kind::kLeak);
  EXPECT_LT(outcome->updates_done, 15);
  ASSERT_TRUE(outcome->details.has_value());
  EXPECT_GT(outcome->details->growth_bytes.value_or(0), 64 << 10);
}

TEST_F(TrainerLeakTest, ACleanRunIsNotFlagged) {
  Discard discard;
  Trainer trainer(spec_, *corpus_, &discard);
  Result<TrainOutcome> outcome = trainer.Run(Options());
  ASSERT_TRUE(outcome.ok());
  EXPECT_EQ(outcome->kind, TrainOutcome::Kind::kFinished);
}

TEST(ThroughputTest, AchievedAbovePeakIsAnInvalidMeasurementNotASpeedup) {
  const ThroughputAssessment ok = AssessThroughput(40e9, 100e9);
  EXPECT_TRUE(ok.valid);
  EXPECT_DOUBLE_EQ(ok.mfu, 0.4);
  const ThroughputAssessment bad = AssessThroughput(150e9, 100e9);
  EXPECT_FALSE(bad.valid);
  EXPECT_EQ(bad.mfu, 0.0);
  EXPECT_NE(bad.note.find("above the measured machine peak"), std::string::npos);
}

TEST(ThroughputTest, ModelFlopsFollowTheSixNRule) {
  const ModelSpec spec = GptModelSpec({2, 2, 32, 16, 256, 0.0, true});
  const std::shared_ptr<TrainableModel> model = BuildModel(spec, 1, "test");
  const double parameters = static_cast<double>(CountParameters(*model));
  EXPECT_DOUBLE_EQ(*TrainingFlopsPerSample(*model, spec).value,
                   (6.0 * parameters + 12.0 * 2 * 16 * 32) * 16);
}

TEST(ThroughputTest, TheDeviceDescriptionOfTheCpuNamesItAndItsMemory) {
  const nlohmann::json d = ToJson(DeviceDescription(torch::kCPU));
  EXPECT_EQ(d["type"], "cpu");
  EXPECT_FALSE(d["name"].get<std::string>().empty());
  EXPECT_GT(d["total_memory_bytes"].get<std::int64_t>(), 1LL << 30);
}

nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// The cache's one entry (the probes below run on one device, precision and thread count).
nlohmann::json OnlyEntry(const std::string& cache) {
  const nlohmann::json entries = ReadJson(cache);
  EXPECT_EQ(entries.size(), 1u) << entries.dump();
  return entries.begin().value();
}

void WriteOnlyEntry(const std::string& cache, const nlohmann::json& entry) {
  nlohmann::json entries = ReadJson(cache);
  entries.begin().value() = entry;
  std::ofstream(cache) << entries.dump();
}

TEST(ThroughputTest, PeakProbeIsCachedWithHowAndWhenItWasMeasured) {
  testing::TempDir dir;
  const std::string cache = dir.File("peak.json");
  const double first = PeakFlops(Precision::kFp32, torch::kCPU, cache);
  EXPECT_GT(first, 1e8);
  const nlohmann::json entry = OnlyEntry(cache);
  EXPECT_EQ(entry["flops"].get<double>(), first);
  EXPECT_EQ(entry["probes"], kPeakProbes);
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  EXPECT_NEAR(entry["measured_at"].get<double>(), now, 600);
  EXPECT_NE(entry["method"].get<std::string>().find("1024 x 1024 x 1024 fp32"), std::string::npos)
      << entry.dump();
  // Read back, not re-measured, also after a run well below the peak.
  EXPECT_EQ(PeakFlops(Precision::kFp32, torch::kCPU, cache), first);
  EXPECT_EQ(PeakFlops(Precision::kFp32, torch::kCPU, cache, /*achieved=*/first / 2), first);
  EXPECT_EQ(OnlyEntry(cache)["probes"], kPeakProbes);
}

// A peak probed while something else ran on the core (here: a hundredth of the real one) is
// trusted until a run achieves near or above it; then it is probed again and the best kept.
TEST(ThroughputTest, ARunNearOrAboveTheCachedPeakHasItProbedAgain) {
  testing::TempDir dir;
  const std::string cache = dir.File("peak.json");
  const double real = PeakFlops(Precision::kFp32, torch::kCPU, cache);
  nlohmann::json poisoned = OnlyEntry(cache);
  poisoned["flops"] = real / 100;
  WriteOnlyEntry(cache, poisoned);
  EXPECT_EQ(PeakFlops(Precision::kFp32, torch::kCPU, cache), real / 100);

  const double revised = PeakFlops(Precision::kFp32, torch::kCPU, cache, /*achieved=*/real / 95);
  EXPECT_GT(revised, real / 10);
  const nlohmann::json entry = OnlyEntry(cache);
  EXPECT_EQ(entry["flops"].get<double>(), revised);
  EXPECT_EQ(entry["probes"], 2 * kPeakProbes);
}

TEST(ThroughputTest, AnEntryOfAnotherFormOrACorruptCacheIsMeasuredAnew) {
  testing::TempDir dir;
  const std::string cache = dir.File("peak.json");
  PeakFlops(Precision::kFp32, torch::kCPU, cache);
  WriteOnlyEntry(cache, 1.0);  // a bare number: the cache of an earlier trainerd
  EXPECT_GT(PeakFlops(Precision::kFp32, torch::kCPU, cache), 1e8);
  EXPECT_EQ(OnlyEntry(cache)["probes"], kPeakProbes);
  std::ofstream(cache) << "{ not json";
  EXPECT_GT(PeakFlops(Precision::kFp32, torch::kCPU, cache), 1e8);
}

class CudaThroughputTest : public testing::CudaTest {};

TEST_F(CudaThroughputTest, TheDeviceDescriptionNamesTheGpu) {
  const nlohmann::json d = ToJson(DeviceDescription(cuda_));
  EXPECT_EQ(d["type"], "cuda");
  EXPECT_FALSE(d["name"].get<std::string>().empty());
  EXPECT_GT(d["total_memory_bytes"].get<std::int64_t>(), 1LL << 30);
  EXPECT_NE(d["compute_capability"].get<std::string>().find('.'), std::string::npos);
  EXPECT_NE(d["driver_version"], "0.0");
  EXPECT_NE(d["runtime_version"], "0.0");
}

TEST_F(CudaThroughputTest, ThePeakProbeRunsOnTheGpuAndIsCachedUnderItsName) {
  testing::TempDir dir;
  const std::string cache = dir.File("peak.json");
  const double gpu = PeakFlops(Precision::kBf16, cuda_, cache);
  EXPECT_GT(gpu, 0);
  std::ifstream in(cache);
  const nlohmann::json entries = nlohmann::json::parse(in);
  ASSERT_EQ(entries.size(), 1u);
  const std::string name = DeviceDescription(cuda_).name;
  EXPECT_NE(entries.begin().key().find(name), std::string::npos) << entries.begin().key();
}

}  // namespace
}  // namespace trainerd
