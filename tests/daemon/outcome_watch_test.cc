// The outcome watch on a real run store and real release folders, with the clock set by the
// test: the comparison's rules (maturity, min_count, direction, tolerance, slices) and the
// rollback it takes, or does not take for a pinned release.
#include "trainerd/daemon/outcome_watch.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "../support/temp_dir.h"
#include "trainerd/daemon/current_release.h"
#include "trainerd/daemon/state_layout.h"

namespace trainerd::daemon {
namespace {

constexpr double kHour = 3600;

// Now is whatever the test last set.
class SetClock final : public Clock {
 public:
  double Now() const override { return now; }
  double now = 0;
};

OutcomeMetricConfig Ctr() {
  OutcomeMetricConfig ctr;
  ctr.name = "ctr";
  ctr.higher_is_better = true;
  ctr.maturity_seconds = 72 * kHour;
  ctr.min_count = 100;
  ctr.tolerance = 0.02;
  return ctr;
}

// Only what the watch judges is exported: the serving side may report any slice or metric.
TEST(JudgedTotalsTest, KeepsTheConfiguredMetricsOnTheJudgedSlices) {
  OutcomesConfig config;
  config.metrics = {Ctr()};
  const std::vector<store::OutcomeTotal> totals = {{"en", "ctr", 0.1, 400, 0, 0},
                                                   {"de", "ctr", 0.1, 400, 0, 0},
                                                   {"en", "unjudged", 0.1, 400, 0, 0}};
  EXPECT_EQ(JudgedTotals(config, totals).size(), 2u);
  config.slices = {"en"};
  const std::vector<store::OutcomeTotal> judged = JudgedTotals(config, totals);
  ASSERT_EQ(judged.size(), 1u);
  EXPECT_EQ(judged[0], totals[0]);
}

// A mean that overflowed (inf) or that SQLite returned as NULL (NaN) judges nothing: inf
// withdrew a good release (worse by inf), NaN never withdrew a bad one.
TEST(CompareOutcomesTest, AMeanThatIsNotFiniteIsNotJudged) {
  OutcomesConfig config;
  config.metrics = {Ctr()};
  config.metrics[0].higher_is_better = false;
  for (const double broken : {INFINITY, -INFINITY, NAN}) {
    const std::vector<store::OutcomeTotal> current = {{"en", "ctr", broken, 400, 0, 0},
                                                      {"fr", "ctr", 0.1, 400, 0, 0}};
    const std::vector<store::OutcomeTotal> previous = {{"en", "ctr", 0.1, 400, 0, 0},
                                                       {"fr", "ctr", broken, 400, 0, 0}};
    const OutcomeVerdict verdict = CompareOutcomes(config, current, previous, 72 * kHour);
    EXPECT_TRUE(verdict.compared.empty()) << broken;
    EXPECT_FALSE(verdict.regressed());
    ASSERT_EQ(verdict.waiting.size(), 2u);
    EXPECT_EQ(verdict.waiting[0],
              "ctr on en: the mean of its outcomes is not a finite number; not judged");
  }
}

TEST(CompareOutcomesTest, ComparesOnlyMatureMetricsOnSlicesWithEnoughOutcomesOnBothSides) {
  OutcomesConfig config;
  config.metrics = {Ctr()};
  OutcomeMetricConfig refunds = Ctr();
  refunds.name = "refunds";
  refunds.higher_is_better = false;
  refunds.maturity_seconds = 200 * kHour;
  config.metrics.push_back(refunds);
  const std::vector<store::OutcomeTotal> current = {{"de", "ctr", 0.100, 99, 0, 0},
                                                    {"en", "ctr", 0.097, 400, 0, 0},
                                                    {"fr", "ctr", 0.099, 400, 0, 0},
                                                    {"en", "refunds", 0.5, 400, 0, 0}};
  const std::vector<store::OutcomeTotal> previous = {{"de", "ctr", 0.2, 400, 0, 0},
                                                     {"en", "ctr", 0.100, 400, 0, 0},
                                                     {"fr", "ctr", 0.100, 400, 0, 0},
                                                     {"en", "refunds", 0.1, 400, 0, 0}};
  // Not yet mature: nothing compared.
  OutcomeVerdict early = CompareOutcomes(config, current, previous, 71 * kHour);
  EXPECT_TRUE(early.compared.empty());
  EXPECT_FALSE(early.regressed());
  ASSERT_EQ(early.waiting.size(), 2u);
  EXPECT_EQ(early.waiting[0], "ctr: live 71 h of its 72 h maturity");

  OutcomeVerdict verdict = CompareOutcomes(config, current, previous, 72 * kHour);
  // de has 99 of 100 outcomes; refunds is not mature: only en and fr's ctr are compared.
  ASSERT_EQ(verdict.compared.size(), 2u);
  EXPECT_EQ(verdict.compared[0].current.slice, "en");
  EXPECT_NEAR(verdict.compared[0].worse_by, 0.03, 1e-12);
  EXPECT_TRUE(verdict.compared[0].regressed) << "3 % worse, 2 % allowed";
  EXPECT_EQ(verdict.compared[1].current.slice, "fr");
  EXPECT_FALSE(verdict.compared[1].regressed) << "1 % worse, 2 % allowed";
  EXPECT_TRUE(verdict.regressed());
  EXPECT_EQ(verdict.waiting[0],
            "ctr on de: 99 outcomes for the current release and 400 for the previous, 100 "
            "needed for each");

  // Lower is better: a higher refund rate is worse; judged slices limit the comparison.
  config.metrics[1].maturity_seconds = 0;
  config.slices = {"en"};
  OutcomeVerdict lower = CompareOutcomes(config, current, previous, 72 * kHour);
  ASSERT_EQ(lower.compared.size(), 2u);
  EXPECT_EQ(lower.compared[1].current.metric, "refunds");
  EXPECT_NEAR(lower.compared[1].worse_by, 4.0, 1e-12);
  EXPECT_TRUE(lower.compared[1].regressed);
  config.metrics[0].higher_is_better = false;
  EXPECT_FALSE(CompareOutcomes(config, current, previous, 72 * kHour).compared[0].regressed)
      << "a lower ctr is better when lower is better";
}

// The total of ctr outcomes on `slice` that came in `lines` of (value, count).
store::OutcomeTotal Lines(const std::string& slice,
                          const std::vector<std::pair<double, std::int64_t>>& lines) {
  store::OutcomeTotal total{slice, "ctr"};
  double sum = 0;
  for (const auto& [value, count] : lines) {
    sum += value * static_cast<double>(count);
    total.count += count;
    total.sum_of_squares += static_cast<double>(count) * value * value;
  }
  total.value = sum / static_cast<double>(total.count);
  total.lines = static_cast<std::int64_t>(lines.size());
  return total;
}

TEST(OutcomeStandardErrorTest, FromTheSpreadOfTheLinesAroundTheMeanOverTheCount) {
  // Mean 0.125; sum of count x (value - mean)^2 = 300 x 0.025^2 + 100 x 0.075^2 = 0.75 over
  // one degree of freedom: one outcome's variance, and the mean's over 400 outcomes.
  EXPECT_NEAR(*OutcomeStandardError(Lines("en", {{0.10, 300}, {0.20, 100}})), std::sqrt(0.75 / 400),
              1e-12);
  EXPECT_EQ(OutcomeStandardError(Lines("en", {{0.10, 300}})), std::nullopt) << "one line";
}

TEST(CompareOutcomesTest, WorseBeyondTheToleranceButWithinTheNoiseIsNoRegression) {
  OutcomesConfig config;
  config.metrics = {Ctr()};  // 2% tolerance, higher is better
  // 3% worse in both cases; days that spread by +-0.01 around the means make that noise,
  // days within +-0.0002 do not.
  const store::OutcomeTotal before = Lines("en", {{0.09, 200}, {0.11, 200}});
  const OutcomeVerdict noisy =
      CompareOutcomes(config, {Lines("en", {{0.087, 200}, {0.107, 200}})}, {before}, 72 * kHour);
  ASSERT_EQ(noisy.compared.size(), 1u);
  EXPECT_NEAR(noisy.compared[0].worse_by, 0.03, 1e-9);
  EXPECT_NEAR(*noisy.compared[0].difference_standard_error, std::hypot(0.01, 0.98 * 0.01), 1e-9)
      << "the previous mean as the tolerance scales it";
  EXPECT_TRUE(noisy.compared[0].within_noise);
  EXPECT_FALSE(noisy.regressed());
  const OutcomeVerdict steady =
      CompareOutcomes(config, {Lines("en", {{0.0968, 200}, {0.0972, 200}})},
                      {Lines("en", {{0.0998, 200}, {0.1002, 200}})}, 72 * kHour);
  EXPECT_FALSE(steady.compared[0].within_noise);
  EXPECT_TRUE(steady.regressed());
  // Judged as if without noise, the noisy days regress too.
  config.confidence = 0.5;
  EXPECT_TRUE(
      CompareOutcomes(config, {Lines("en", {{0.087, 200}, {0.107, 200}})}, {before}, 72 * kHour)
          .regressed());
}

class OutcomeWatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.state_dir = dir_.File("state");
    config_.outcomes.metrics = {Ctr()};
    ASSERT_TRUE(StateLayout(config_.state_dir).CreateDirectories().ok());
    Result<std::unique_ptr<store::Store>> store = store::Store::Open(config_.database_path());
    ASSERT_TRUE(store.ok()) << store.status().message();
    store_ = std::move(*store);
    ASSERT_TRUE(store_->RecordConfigVersion({"cfg", "model: {kind: gpt}\n", 1.0}).ok());
    first_ = Release(1, 'a', 0);
    second_ = Release(2, 'b', 24 * kHour);
  }

  // A released model of a new run, current from `live_at` on, its folder and link real.
  std::int64_t Release(int night, char sha, double live_at) {
    store::RunRecord run;
    run.config_hash = "cfg";
    run.created_at = live_at;
    run.deadline_at = live_at + 1;
    Result<std::int64_t> run_id = store_->CreateRun(run);
    EXPECT_TRUE(run_id.ok());
    const std::string folder =
        StateLayout(config_.state_dir).ReleaseDir(*run_id, std::string(64, sha), true);
    std::filesystem::create_directories(folder);
    Result<std::int64_t> id = store_->RecordRelease(
        {0, *run_id, folder + "/model.pt", std::string(64, sha), true, "{}", live_at, false});
    EXPECT_TRUE(id.ok()) << night;
    EXPECT_TRUE(store_->SetCurrentRelease(*id, live_at).ok());
    EXPECT_TRUE(SyncCurrentReleaseLink(*store_, files_, config_.state_dir).ok());
    return *id;
  }

  void Report(std::int64_t release, const std::string& slice, double value, std::int64_t count) {
    clock_.now += 1;
    ASSERT_TRUE(store_->RecordOutcomes({{release, slice, "ctr", clock_.now, value, count}}).ok());
  }

  std::string LinkedFolder() const {
    return std::filesystem::read_symlink(StateLayout(config_.state_dir).CurrentReleaseLink())
        .filename()
        .string();
  }

  std::vector<store::Event> Events(const std::string& kind) {
    const Result<std::vector<store::Event>> events = store_->ListRecentEvents(100);
    EXPECT_TRUE(events.ok());
    std::vector<store::Event> found;
    for (const store::Event& e : events.ok() ? *events : std::vector<store::Event>{}) {
      if (e.kind == kind) found.push_back(e);
    }
    return found;
  }

  testing::TempDir dir_;
  DaemonConfig config_;
  SetClock clock_;
  LocalFileStore files_;
  std::unique_ptr<store::Store> store_;
  std::int64_t first_ = 0, second_ = 0;
};

TEST_F(OutcomeWatchTest, ARegressionOnOneMatureSliceWithdrawsTheReleaseAndTheFirstIsCurrentAgain) {
  DaemonMetrics metrics("test");
  OutcomeWatch watch(config_, *store_, files_, clock_, &metrics);
  clock_.now = 30 * kHour;
  Report(first_, "en", 0.100, 500);
  Report(first_, "de", 0.100, 500);
  Report(second_, "en", 0.100, 500);
  Report(second_, "de", 0.090, 99);  // 10 % worse, one outcome short
  Result<std::optional<OutcomeVerdict>> verdict = watch.Check();
  ASSERT_TRUE(verdict.ok()) << verdict.status().message();
  ASSERT_TRUE(verdict->has_value());
  EXPECT_TRUE((*verdict)->compared.empty()) << "live 6 h of 72";
  clock_.now = 24 * kHour + 72 * kHour;
  EXPECT_FALSE((*watch.Check())->regressed()) << "de has 99 outcomes of the 100 needed";
  EXPECT_EQ(store_->CurrentRelease()->value().id, second_);
  Report(second_, "de", 0.090, 1);
  verdict = watch.Check();
  ASSERT_TRUE(verdict.ok() && verdict->has_value());
  EXPECT_TRUE((*verdict)->regressed());

  EXPECT_EQ(store_->CurrentRelease()->value().id, first_);
  EXPECT_EQ(LinkedFolder(), std::filesystem::path(store_->GetRelease(first_)->artifact_path)
                                .parent_path()
                                .filename()
                                .string());
  const store::Release withdrawn = *store_->GetRelease(second_);
  ASSERT_TRUE(withdrawn.withdrawn_json);
  const nlohmann::json evidence = nlohmann::json::parse(*withdrawn.withdrawn_json);
  EXPECT_EQ(evidence["rolled_back_to"], first_);
  const std::vector<store::Event> events = Events("outcome_regression");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_NE(events[0].message.find("ctr on de 0.09 (100 outcomes) against 0.1 (500)"),
            std::string::npos)
      << events[0].message;
  EXPECT_NE(metrics.Exposition().find("trainerd_rollbacks_total{reason=\"outcome_regression\"} 1"),
            std::string::npos);
  EXPECT_NE(
      metrics.Exposition().find("trainerd_outcome_count{metric=\"ctr\",release=\"" +
                                std::to_string(second_) + "\",role=\"current\",slice=\"de\"} 100"),
      std::string::npos)
      << metrics.Exposition();
  // The first release replaced none: nothing more to judge, and the gate refuses the second.
  EXPECT_FALSE(watch.Check()->has_value());
  EXPECT_EQ(store_->SetCurrentRelease(second_, clock_.now).code(),
            Status::Code::kFailedPrecondition);
}

TEST_F(OutcomeWatchTest, APinnedReleaseIsNotRolledBackAndOutcomesWithinToleranceChangeNothing) {
  OutcomeWatch watch(config_, *store_, files_, clock_, nullptr);
  clock_.now = 24 * kHour + 72 * kHour;
  Report(first_, "en", 0.100, 500);
  Report(second_, "en", 0.0985, 500);  // 1.5 % worse
  EXPECT_FALSE((*watch.Check())->regressed());
  Report(second_, "en", 0.090, 500);  // now 5.75 % worse
  ASSERT_TRUE(store_->SetReleasePinned(second_, true).ok());
  Result<std::optional<OutcomeVerdict>> verdict = watch.Check();
  ASSERT_TRUE(verdict.ok() && verdict->has_value());
  EXPECT_TRUE((*verdict)->regressed());
  EXPECT_EQ(store_->CurrentRelease()->value().id, second_) << "pinned";
  EXPECT_TRUE(Events("outcome_regression").empty());
  EXPECT_TRUE(Events("outcome_rollback_failed").empty()) << "a pin is a decision, not an error";
  ASSERT_TRUE(store_->SetReleasePinned(second_, false).ok());
  ASSERT_TRUE(watch.Check().ok());
  EXPECT_EQ(store_->CurrentRelease()->value().id, first_) << "unpinned";
}

}  // namespace
}  // namespace trainerd::daemon
