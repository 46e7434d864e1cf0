// The exporter's metrics: names, labels and values from a run record, in an exposition that
// `promtool check metrics` (Debian package prometheus) accepts.
#include "trainerd/daemon/daemon_metrics.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <set>
#include <sstream>
#include <string>

#include "trainerd/daemon/policy.h"

namespace trainerd::daemon {
namespace {

store::RunRecord FinishedRun(store::RunStatus status) {
  store::RunRecord run;
  run.id = 12;
  run.status = status;
  run.started_at = 1000;
  run.ended_at = 1600;
  run.deadline_at = 2000;
  run.plan = PlanSpec{4, 8, {0, 1, 2}, Precision::kBf16};
  run.peak_memory = store::MemoryByCategory{100, 100, 200, 5000, 300, 16, 5800};
  run.samples_per_second = 250.5;
  run.mfu = 0.31;
  run.cost_per_sample = 4e-7;
  run.final_loss = 2.25;
  run.world_size = 2;
  return run;
}

bool Contains(const std::string& text, const std::string& line) {
  return text.find(line + "\n") != std::string::npos;
}

TEST(DaemonMetricsTest, EveryCounterLabelStartsAtZero) {
  const DaemonMetrics metrics("0.1.0+gabc");
  const std::string text = metrics.Exposition();
  EXPECT_TRUE(Contains(text, R"(trainerd_build_info{version="0.1.0+gabc"} 1)")) << text;
  EXPECT_TRUE(Contains(text, R"(trainerd_runs_total{outcome="oom"} 0)")) << text;
  EXPECT_TRUE(Contains(text, R"(trainerd_fallbacks_total{reason="crash"} 0)")) << text;
  EXPECT_TRUE(Contains(text, R"(trainerd_rollbacks_total{reason="regression"} 0)")) << text;
  EXPECT_TRUE(Contains(text, "trainerd_run_in_progress 0")) << text;
  EXPECT_TRUE(Contains(text, "trainerd_ooms_total 0")) << text;
  // Nothing about a last run before there is one.
  EXPECT_EQ(text.find("trainerd_train_samples_per_second "), std::string::npos) << text;
}

TEST(DaemonMetricsTest, EveryFinalStatusAndFallbackCauseHasASeriesFromTheStart) {
  const DaemonMetrics metrics("v");
  const std::string text = metrics.Exposition();
  for (const store::RunStatus status :
       {store::RunStatus::kSucceeded, store::RunStatus::kOom, store::RunStatus::kCrashed,
        store::RunStatus::kLeak, store::RunStatus::kDeadline, store::RunStatus::kRegressed,
        store::RunStatus::kCancelled, store::RunStatus::kInterrupted,
        store::RunStatus::kRejected}) {
    const std::string name(store::ToString(status));
    EXPECT_TRUE(Contains(text, "trainerd_runs_total{outcome=\"" + name + "\"} 0")) << name;
  }
  for (const AttemptOutcome outcome : {AttemptOutcome::kOom, AttemptOutcome::kCrashed,
                                       AttemptOutcome::kLeak, AttemptOutcome::kRejected}) {
    ASSERT_TRUE(CallsForFallback(outcome));
    const std::string name(ToString(outcome));
    EXPECT_TRUE(Contains(text, "trainerd_fallbacks_total{reason=\"" + name + "\"} 0")) << name;
    EXPECT_TRUE(Contains(text, "trainerd_rollbacks_total{reason=\"" + name + "\"} 0")) << name;
  }
}

TEST(DaemonMetricsTest, AFinishedRunSetsTheLastRunGaugesAndCountsItsOutcome) {
  DaemonMetrics metrics("v");
  metrics.RunStarted();
  EXPECT_TRUE(Contains(metrics.Exposition(), "trainerd_run_in_progress 1"));
  metrics.Progress(2000, 1900);
  EXPECT_TRUE(Contains(metrics.Exposition(), "trainerd_window_margin_seconds 100"));
  metrics.RunFinished(FinishedRun(store::RunStatus::kSucceeded), {{"GPL-3", 2.5}});
  metrics.Budget(1 << 30, 966367641);
  metrics.PlanTimed(0.25);
  metrics.PlanTrained(-0.125);
  const std::string text = metrics.Exposition();
  EXPECT_TRUE(Contains(text, "trainerd_run_in_progress 0")) << text;
  EXPECT_TRUE(Contains(text, R"(trainerd_runs_total{outcome="succeeded"} 1)")) << text;
  EXPECT_TRUE(Contains(text, "trainerd_last_success_timestamp_seconds 1600")) << text;
  EXPECT_TRUE(Contains(text, "trainerd_run_duration_seconds 600")) << text;
  EXPECT_TRUE(Contains(text, "trainerd_window_margin_seconds 400")) << text;
  EXPECT_TRUE(Contains(text, "trainerd_train_samples_per_second 250.5")) << text;
  EXPECT_TRUE(Contains(text, "trainerd_train_world_size 2")) << text;
  EXPECT_TRUE(Contains(text, "trainerd_train_loss 2.25")) << text;
  EXPECT_TRUE(Contains(text, R"(trainerd_eval_loss{slice="GPL-3"} 2.5)")) << text;
  EXPECT_TRUE(Contains(text, R"(trainerd_memory_ledger_bytes{category="activations"} 5000)"))
      << text;
  EXPECT_TRUE(Contains(text, "trainerd_memory_peak_bytes 5800")) << text;
  // The peak is no category: a sum() over the ledger never counts it in.
  EXPECT_FALSE(Contains(text, R"(category="peak")")) << text;
  EXPECT_TRUE(Contains(text, "trainerd_memory_budget_bytes 1073741824")) << text;
  EXPECT_TRUE(Contains(text, "trainerd_memory_usable_bytes 966367641")) << text;
  EXPECT_TRUE(Contains(text, "trainerd_mfu_ratio 0.31")) << text;
  EXPECT_TRUE(Contains(text, "trainerd_plan_microbatch 4")) << text;
  EXPECT_TRUE(Contains(text, "trainerd_plan_accumulation_steps 8")) << text;
  EXPECT_TRUE(Contains(text, "trainerd_plan_checkpointed_blocks 3")) << text;
  EXPECT_TRUE(Contains(text, "trainerd_plan_optimizer_state_on_host 0")) << text;
  EXPECT_TRUE(Contains(text, "trainerd_plan_zero_stage 0")) << text;
  EXPECT_TRUE(Contains(text, "trainerd_plan_time_model_error_ratio 0.25")) << text;
  EXPECT_TRUE(Contains(text, "trainerd_plan_duration_error_ratio -0.125")) << text;
}

TEST(DaemonMetricsTest, OomsLeaksFallbacksAndRollbacksAreCounted) {
  DaemonMetrics metrics("v");
  metrics.RunFinished(FinishedRun(store::RunStatus::kOom), {});
  metrics.RunFinished(FinishedRun(store::RunStatus::kLeak), {});
  metrics.Fallback("oom");
  metrics.Rollback("oom");
  metrics.Rollback("regression");
  const std::string text = metrics.Exposition();
  EXPECT_TRUE(Contains(text, "trainerd_ooms_total 1")) << text;
  EXPECT_TRUE(Contains(text, "trainerd_leaks_total 1")) << text;
  EXPECT_TRUE(Contains(text, R"(trainerd_fallbacks_total{reason="oom"} 1)")) << text;
  EXPECT_TRUE(Contains(text, R"(trainerd_rollbacks_total{reason="regression"} 1)")) << text;
  // A failed run is no success.
  EXPECT_EQ(text.find("trainerd_last_success_timestamp_seconds "), std::string::npos);
}

// FamilyNames() is what dashboards and alerts are checked against (tests/deploy): it names
// exactly the families a daemon with a finished run serves.
TEST(DaemonMetricsTest, FamilyNamesAreTheFamiliesServedAfterARun) {
  DaemonMetrics metrics("v");
  metrics.RunStarted();
  metrics.Progress(2000, 1900);
  store::RunRecord run = FinishedRun(store::RunStatus::kSucceeded);
  run.data_quality_json = R"({"pass":true,"size_ratio":1.0,"breaches":[]})";
  metrics.RunFinished(run, {{"all", 2.5}});
  metrics.Budget(1 << 30, 1 << 29);
  metrics.PlanTimed(0.1);
  metrics.PlanTrained(-0.05);
  metrics.Outcomes(2, {{"en", "ctr", 0.1, 10, 0, 0}}, 1, {});
  metrics.Storage(5000, 1000, 0);
  std::set<std::string> served;
  std::istringstream exposition(metrics.Exposition());
  for (std::string line; std::getline(exposition, line);) {
    std::istringstream words(line);
    std::string hash, keyword, name;
    if (words >> hash >> keyword >> name && hash == "#" && keyword == "TYPE") served.insert(name);
  }
  const std::set<std::string> named(metrics.FamilyNames().begin(), metrics.FamilyNames().end());
  EXPECT_EQ(named, served);
  EXPECT_EQ(named.size(), metrics.FamilyNames().size()) << "a family is named twice";
}

TEST(DaemonMetricsTest, ARunsInputQualityFiguresAreGaugesAndItsBreachesCounted) {
  DaemonMetrics metrics("v");
  store::RunRecord run = FinishedRun(store::RunStatus::kDataQuality);
  run.data_quality_json =
      R"({"pass":false,"size_ratio":0.25,"id_divergence":null,"beyond_vocabulary":0.0,)"
      R"("not_finite_rows":0.5,"learned_share":0.375,"breaches":["smaller","NaN rows"]})";
  metrics.RunFinished(run, {});
  const std::string text = metrics.Exposition();
  EXPECT_TRUE(Contains(text, R"(trainerd_data_quality{figure="size_ratio"} 0.25)")) << text;
  EXPECT_TRUE(Contains(text, R"(trainerd_data_quality{figure="not_finite_rows"} 0.5)")) << text;
  EXPECT_TRUE(Contains(text, R"(trainerd_data_quality{figure="learned_share"} 0.375)")) << text;
  EXPECT_FALSE(Contains(text, R"(figure="id_divergence")")) << "not measured: no series";
  EXPECT_TRUE(Contains(text, "trainerd_data_quality_breaches 2")) << text;
  EXPECT_TRUE(Contains(text, R"(trainerd_runs_total{outcome="data_quality"} 1)")) << text;
}

TEST(DaemonMetricsTest, OutcomesHaveSeriesOnlyForTheCurrentReleaseAndTheOneItReplaced) {
  DaemonMetrics metrics("v");
  metrics.Outcomes(2, {{"en", "ctr", 0.1, 10, 0, 0}}, 1, {{"en", "ctr", 0.2, 30, 0, 0}});
  metrics.Outcomes(3, {{"de", "ctr", 0.4, 5, 0, 0}}, 2, {{"en", "ctr", 0.1, 10, 0, 0}});
  const std::string text = metrics.Exposition();
  EXPECT_TRUE(Contains(
      text, R"(trainerd_outcome_value{metric="ctr",release="3",role="current",slice="de"} 0.4)"))
      << text;
  EXPECT_TRUE(Contains(
      text, R"(trainerd_outcome_count{metric="ctr",release="2",role="previous",slice="en"} 10)"))
      << text;
  EXPECT_FALSE(Contains(text, R"(release="1")")) << "the release two nights back is gone";
  EXPECT_FALSE(Contains(text, R"(release="2",role="current")"));
}

TEST(DaemonMetricsTest, OutcomeSeriesAreBoundedInNumberAndLabelLength) {
  DaemonMetrics metrics("v");
  std::vector<store::OutcomeTotal> many;
  for (int i = 0; i < 1000; ++i)
    many.push_back({"slice" + std::to_string(i), "ctr", 0.1, 10, 0, 0});
  many.push_back({std::string(129, 'x'), "ctr", 0.1, 10, 0, 0});
  metrics.Outcomes(2, many, 1, {{std::string(4096, 'y'), "ctr", 0.1, 10, 0, 0}});
  const std::string text = metrics.Exposition();
  EXPECT_NE(text.find(R"(slice="slice99"})"), std::string::npos) << "the first 100 series";
  EXPECT_EQ(text.find(R"(slice="slice100"})"), std::string::npos);
  EXPECT_EQ(text.find(std::string(129, 'x')), std::string::npos);
  EXPECT_EQ(text.find(std::string(129, 'y')), std::string::npos);
}

TEST(DaemonMetricsTest, RestoringTheLastRunDoesNotCountIt) {
  DaemonMetrics metrics("v");
  metrics.RunFinished(FinishedRun(store::RunStatus::kSucceeded), {}, /*count=*/false);
  const std::string text = metrics.Exposition();
  EXPECT_TRUE(Contains(text, R"(trainerd_runs_total{outcome="succeeded"} 0)")) << text;
  EXPECT_TRUE(Contains(text, "trainerd_train_samples_per_second 250.5")) << text;
}

TEST(DaemonMetricsTest, ExpositionPassesPromtoolCheckMetrics) {
  DaemonMetrics metrics("0.1.0");
  metrics.RunFinished(FinishedRun(store::RunStatus::kSucceeded),
                      {{"GPL-3", 2.5}, {"MPL-2.0", 2.1}});
  metrics.Budget(1 << 30, 1 << 29);
  metrics.Fallback("crash");
  const std::string command = std::string(TRAINERD_PROMTOOL) + " check metrics";
  FILE* promtool = ::popen(command.c_str(), "w");
  ASSERT_NE(promtool, nullptr) << "cannot run " << TRAINERD_PROMTOOL
                               << " (Debian package prometheus; scripts/install-deps.sh)";
  const std::string text = metrics.Exposition();
  std::fwrite(text.data(), 1, text.size(), promtool);
  const int status = ::pclose(promtool);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << text;
}

TEST(MetricsEndpointTest, AnAddressInUseIsAnErrorNamingIt) {
  DaemonMetrics metrics("v");
  Result<std::unique_ptr<MetricsEndpoint>> first = MetricsEndpoint::Start("127.0.0.1:0", metrics);
  ASSERT_TRUE(first.ok()) << first.status().message();
  ASSERT_GT((*first)->port(), 0);
  const std::string taken = "127.0.0.1:" + std::to_string((*first)->port());
  Result<std::unique_ptr<MetricsEndpoint>> second = MetricsEndpoint::Start(taken, metrics);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find(taken), std::string::npos);
}

}  // namespace
}  // namespace trainerd::daemon
