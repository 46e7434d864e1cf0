// The release gate over many nights of the same job (docs/daemon.md, "The release gate"): the
// tiny job (tests/support/tiny_job.h) trained with kSeeds seeds, each night's final eval read
// by the daemon from the worker's own event lines (WorkerReport), and every ordered pair of
// nights judged as candidate against release. Identical retrains must pass (false holds);
// a candidate made worse by 2% and 5% (each window's loss scaled, as a uniformly worse model
// would be) must be held back (detection). The figures are printed for docs/daemon.md.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "../support/recording_sink.h"
#include "../support/temp_dir.h"
#include "../support/tiny_job_test.h"
#include "trainerd/daemon/eval_noise.h"
#include "trainerd/daemon/policy.h"
#include "trainerd/daemon/worker_report.h"
#include "trainerd/trainer/loop/trainer.h"

namespace trainerd::daemon {
namespace {

constexpr int kSeeds = 16;

class ReleaseGateSimulationTest : public testing::TinyJobTest {
 protected:
  // The final eval of one night trained with `seed`, as the daemon records it.
  SliceEvals Night(std::uint64_t seed) {
    JobSpec spec = spec_;
    spec.training.seed = seed;
    spec.data.eval_windows_per_slice = 32;
    testing::TempDir dir;
    TrainerOptions options;
    options.checkpoint_path = dir.File("checkpoint.pt");
    options.model_path = dir.File("model.pt");
    testing::RecordingSink sink;
    Trainer trainer(spec, *corpus_, &sink);
    const Result<TrainOutcome> outcome = trainer.Run(options);
    EXPECT_TRUE(outcome.ok() && outcome->kind == TrainOutcome::Kind::kFinished);
    WorkerReport report;
    for (const nlohmann::json& event : sink.events) report.Consume(event.dump(), 0);
    return FinalSliceEvals(report.evals());
  }

  // `night` with every slice's loss, and each of its windows', `factor` times larger.
  static SliceEvals Worse(SliceEvals night, double factor) {
    for (auto& [slice, eval] : night) {
      eval.loss *= factor;
      std::optional<WindowLosses> windows = ParseWindowLosses(eval.windows_json);
      EXPECT_TRUE(windows.has_value()) << slice;
      for (double& sum : windows->sums) sum *= factor;
      eval.windows_json = ToJson(*windows).dump();
    }
    return night;
  }

  // The share of ordered pairs of different nights whose candidate, made `factor` times
  // worse, the gate holds back.
  static double HeldShare(const std::vector<SliceEvals>& nights, double factor, bool paired,
                          const RegressionConfig& regression) {
    int held = 0;
    int pairs = 0;
    for (std::size_t candidate = 0; candidate < nights.size(); ++candidate) {
      for (std::size_t release = 0; release < nights.size(); ++release) {
        if (candidate == release) continue;
        held +=
            ReleaseGate(Worse(nights[candidate], factor), nights[release], 1, paired, regression)
                    .pass
                ? 0
                : 1;
        ++pairs;
      }
    }
    return static_cast<double>(held) / pairs;
  }
};

TEST_F(ReleaseGateSimulationTest, IdenticalRetrainsPassAndAFivePercentRegressionIsHeld) {
  std::vector<SliceEvals> nights;
  for (int seed = 1; seed <= kSeeds; ++seed)
    nights.push_back(Night(static_cast<std::uint64_t>(seed)));
  ASSERT_EQ(nights.front().size(), 2u) << "the tiny job's two slices";
  // The defaults (2% tolerance, 95% one-sided) against the release alone: the tiny job's
  // model is not what the baseline check is simulated on.
  RegressionConfig regression;
  regression.beat_baseline = false;
  RegressionConfig noiseless = regression;
  noiseless.gate_confidence = 0.5;
  std::printf("{\"seeds\": %d, \"pairs\": %d", kSeeds, kSeeds * (kSeeds - 1));
  for (const bool paired : {true, false}) {
    for (const double factor : {1.0, 1.02, 1.05}) {
      std::printf(", \"%s held at +%.0f%%\": %.3f, \"without noise\": %.3f",
                  paired ? "paired" : "unpaired", 100 * (factor - 1),
                  HeldShare(nights, factor, paired, regression),
                  HeldShare(nights, factor, paired, noiseless));
    }
  }
  std::printf("}\n");
  // The gate as a night runs it on unchanged data: the windows paired.
  EXPECT_LE(HeldShare(nights, 1.0, true, regression), 0.01) << "false holds";
  EXPECT_GE(HeldShare(nights, 1.05, true, regression), 0.95) << "a 5% regression detected";
}

}  // namespace
}  // namespace trainerd::daemon
