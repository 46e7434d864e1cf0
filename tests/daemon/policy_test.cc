// The fallback, rollback, regression and release-gate rules (daemon/policy.h).
#include "trainerd/daemon/policy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "trainerd/daemon/eval_noise.h"

namespace trainerd::daemon {
namespace {

using store::ConfigState;
PlanSpec Plan(int microbatch, int steps, Precision precision = Precision::kFp32) {
  return PlanSpec{microbatch, steps, {}, precision};
}

using By = WorkerExit::StoppedBy;

WorkerExit Exited(int code, bool saw_finish = false, std::string error_kind = "",
                  By stopped_by = By::kNobody) {
  WorkerExit e;
  e.exited = true;
  e.code = code;
  e.saw_finish = saw_finish;
  e.error_kind = std::move(error_kind);
  e.stopped_by = stopped_by;
  return e;
}

WorkerExit Killed(int signal, bool oom_kill_rose = false, By stopped_by = By::kNobody) {
  WorkerExit e;
  e.signal = signal;
  e.oom_kill_rose = oom_kill_rose;
  e.stopped_by = stopped_by;
  return e;
}

TEST(ClassifyExitTest, EachExitMapsToItsOutcome) {
  EXPECT_EQ(ClassifyExit(Exited(0, true)), AttemptOutcome::kSucceeded);
  EXPECT_EQ(ClassifyExit(Exited(0, false)), AttemptOutcome::kCrashed);  // no finish event
  EXPECT_EQ(ClassifyExit(Exited(4)), AttemptOutcome::kOom);
  EXPECT_EQ(ClassifyExit(Exited(1, false, "oom")), AttemptOutcome::kOom);
  EXPECT_EQ(ClassifyExit(Exited(8)), AttemptOutcome::kLeak);
  EXPECT_EQ(ClassifyExit(Exited(6, false, "nan")), AttemptOutcome::kCrashed);
  // SIGKILL is an OOM only when the cgroup's oom_kill count rose.
  EXPECT_EQ(ClassifyExit(Killed(9, true)), AttemptOutcome::kOom);
  EXPECT_EQ(ClassifyExit(Killed(9)), AttemptOutcome::kCrashed);
  EXPECT_EQ(ClassifyExit(Killed(11)), AttemptOutcome::kCrashed);
}

TEST(ClassifyExitTest, AWorkerTheDaemonStoppedIsNotAFailure) {
  EXPECT_EQ(ClassifyExit(Exited(75, false, "", By::kDeadline)), AttemptOutcome::kDeadline);
  EXPECT_EQ(ClassifyExit(Killed(9, false, By::kDeadline)), AttemptOutcome::kDeadline);
  EXPECT_EQ(ClassifyExit(Exited(75, false, "", By::kDaemonStop)), AttemptOutcome::kInterrupted);
  EXPECT_EQ(ClassifyExit(Exited(75, false, "", By::kOperator)), AttemptOutcome::kCancelled);
  EXPECT_EQ(RunStatusFor(AttemptOutcome::kDeadline), store::RunStatus::kDeadline);
  EXPECT_EQ(RunStatusFor(AttemptOutcome::kOom), store::RunStatus::kOom);
}

TEST(ClassifyParityCheckTest, PassTrainsExitSevenRejectsOomIsOomAnythingElseIsACrash) {
  EXPECT_EQ(ClassifyParityCheck(Exited(0), true), AttemptOutcome::kSucceeded);
  // Exit 0 without a passing report is a broken worker, not a pass.
  EXPECT_EQ(ClassifyParityCheck(Exited(0), false), AttemptOutcome::kCrashed);
  EXPECT_EQ(ClassifyParityCheck(Exited(7), false), AttemptOutcome::kRejected);
  EXPECT_EQ(ClassifyParityCheck(Exited(4), false), AttemptOutcome::kOom);
  EXPECT_EQ(ClassifyParityCheck(Exited(1, false, "oom"), false), AttemptOutcome::kOom);
  EXPECT_EQ(ClassifyParityCheck(Killed(9, true), false), AttemptOutcome::kOom);
  EXPECT_EQ(ClassifyParityCheck(Killed(9), false), AttemptOutcome::kCrashed);
  EXPECT_EQ(ClassifyParityCheck(Killed(11), false), AttemptOutcome::kCrashed);
  EXPECT_EQ(ClassifyParityCheck(Exited(1), false), AttemptOutcome::kCrashed);
  EXPECT_EQ(ClassifyParityCheck(Exited(8), false), AttemptOutcome::kCrashed);  // not a run
  EXPECT_EQ(ClassifyParityCheck(Exited(0, true), false), AttemptOutcome::kCrashed);
}

TEST(ClassifyParityCheckTest, ACheckTheDaemonStoppedEndsAsTheStopSays) {
  EXPECT_EQ(ClassifyParityCheck(Killed(15, false, By::kOperator), false),
            AttemptOutcome::kCancelled);
  EXPECT_EQ(ClassifyParityCheck(Exited(7, false, "", By::kOperator), false),
            AttemptOutcome::kCancelled);
  EXPECT_EQ(ClassifyParityCheck(Killed(15, false, By::kDeadline), false),
            AttemptOutcome::kDeadline);
  EXPECT_EQ(ClassifyParityCheck(Exited(0, false, "", By::kDaemonStop), true),
            AttemptOutcome::kInterrupted);
}

TEST(AttemptOutcomeTest, ARejectedPlanIsARejectedRunAndCallsForAFallback) {
  EXPECT_EQ(ToString(AttemptOutcome::kRejected), "rejected");
  EXPECT_EQ(RunStatusFor(AttemptOutcome::kRejected), store::RunStatus::kRejected);
  for (const AttemptOutcome o : {AttemptOutcome::kOom, AttemptOutcome::kCrashed,
                                 AttemptOutcome::kLeak, AttemptOutcome::kRejected}) {
    EXPECT_TRUE(CallsForFallback(o)) << ToString(o);
  }
  for (const AttemptOutcome o : {AttemptOutcome::kSucceeded, AttemptOutcome::kDeadline,
                                 AttemptOutcome::kInterrupted, AttemptOutcome::kCancelled}) {
    EXPECT_FALSE(CallsForFallback(o)) << ToString(o);
  }
}

TEST(IsValidatedPlanTest, TheValidatedSourceOrThePlanOfTheLastSucceededRun) {
  EXPECT_TRUE(IsValidatedPlan({"c", PlanSource::kValidated, Plan(4, 2)}, Plan(4, 2)));
  EXPECT_TRUE(IsValidatedPlan({"c", PlanSource::kValidated, Plan(4, 2)}, std::nullopt));
  // A re-plan or the job's own plan that came out as the validated plan is not checked again.
  EXPECT_TRUE(IsValidatedPlan({"c", PlanSource::kReplanSmaller, Plan(4, 2)}, Plan(4, 2)));
  EXPECT_TRUE(IsValidatedPlan({"c", PlanSource::kConfig, Plan(4, 2)}, Plan(4, 2)));
  EXPECT_FALSE(IsValidatedPlan({"c", PlanSource::kConfig, Plan(4, 2)}, Plan(8, 1)));
  EXPECT_FALSE(IsValidatedPlan({"c", PlanSource::kPlanner, Plan(4, 2)}, std::nullopt));
  EXPECT_FALSE(
      IsValidatedPlan({"c", PlanSource::kBaseline, Plan(4, 2, Precision::kBf16)}, Plan(4, 2)));
}

TEST(NamedBaselinePlanTest, MicrobatchOneEveryBlockFp32SameEffectiveBatch) {
  const PlanSpec plan = NamedBaselinePlan(32, 4);
  EXPECT_EQ(plan.microbatch, 1);
  EXPECT_EQ(plan.accumulation_steps, 32);
  EXPECT_EQ(plan.checkpoint_blocks, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(plan.precision, Precision::kFp32);
}

TEST(FirstPlanSourceTest, ValidatedThenTheJobsOwnThenThePlanner) {
  EXPECT_EQ(FirstPlanSource(true, true), PlanSource::kValidated);
  EXPECT_EQ(FirstPlanSource(false, true), PlanSource::kConfig);
  EXPECT_EQ(FirstPlanSource(false, false), PlanSource::kPlanner);
}

class FallbackTest : public ::testing::Test {
 protected:
  FallbackInput Input(AttemptOutcome outcome, std::vector<Attempt> tried) {
    FallbackInput in;
    in.outcome = outcome;
    in.tried = std::move(tried);
    in.config_state = ConfigState::kKnownGood;
    in.baseline_plan = NamedBaselinePlan(8, 2);
    in.max_attempts = 4;
    in.seconds_left = 3600;
    return in;
  }
};

TEST_F(FallbackTest, FailedCandidateIsMarkedBadAndRollsBackToKnownGood) {
  FallbackInput in = Input(AttemptOutcome::kOom, {{"cand", PlanSource::kConfig, Plan(8, 1)}});
  in.config_state = ConfigState::kCandidate;
  in.known_good_hash = "good";
  const FallbackDecision d = DecideFallback(in);
  EXPECT_TRUE(d.retry);
  EXPECT_TRUE(d.mark_config_bad);
  EXPECT_TRUE(d.rolled_back);
  EXPECT_EQ(d.config_hash, "good");
  EXPECT_NE(d.reason.find("rolled back"), std::string::npos) << d.reason;
}

TEST_F(FallbackTest, RollbackWithoutAttemptsLeftStillMarksBadButDoesNotRetry) {
  FallbackInput in = Input(AttemptOutcome::kCrashed, {{"cand", PlanSource::kConfig, Plan(8, 1)}});
  in.config_state = ConfigState::kCandidate;
  in.known_good_hash = "good";
  in.max_attempts = 1;
  const FallbackDecision d = DecideFallback(in);
  EXPECT_FALSE(d.retry);
  EXPECT_TRUE(d.mark_config_bad);
  EXPECT_TRUE(d.rolled_back);
}

TEST_F(FallbackTest, KnownGoodConfigWalksDownItsLadder) {
  // Planner plan OOMs -> the last validated plan.
  FallbackInput in = Input(AttemptOutcome::kOom, {{"good", PlanSource::kPlanner, Plan(8, 1)}});
  in.validated_plan = Plan(4, 2);
  FallbackDecision d = DecideFallback(in);
  ASSERT_TRUE(d.retry);
  EXPECT_FALSE(d.mark_config_bad);
  EXPECT_FALSE(d.rolled_back);
  EXPECT_EQ(d.config_hash, "good");
  EXPECT_EQ(d.source, PlanSource::kValidated);
  EXPECT_EQ(d.plan, Plan(4, 2));

  // The validated plan fails too -> a re-plan at a smaller budget.
  in.tried.push_back({"good", PlanSource::kValidated, Plan(4, 2)});
  d = DecideFallback(in);
  ASSERT_TRUE(d.retry);
  EXPECT_EQ(d.source, PlanSource::kReplanSmaller);
  EXPECT_FALSE(d.plan.has_value());

  // The re-plan fails -> the named baseline.
  in.tried.push_back({"good", PlanSource::kReplanSmaller, Plan(2, 4)});
  d = DecideFallback(in);
  ASSERT_TRUE(d.retry);
  EXPECT_EQ(d.source, PlanSource::kBaseline);
  EXPECT_EQ(d.plan, NamedBaselinePlan(8, 2));
  EXPECT_EQ(d.plan->microbatch * d.plan->accumulation_steps, 8);  // same effective batch

  // Even the baseline fails: nothing left.
  in.tried.push_back({"good", PlanSource::kBaseline, NamedBaselinePlan(8, 2)});
  in.max_attempts = 10;
  d = DecideFallback(in);
  EXPECT_FALSE(d.retry);
  EXPECT_FALSE(d.mark_config_bad);  // known-good stays known-good
  EXPECT_NE(d.reason.find("every fallback plan"), std::string::npos) << d.reason;
}

// Where the job lets the planner keep the optimizer state on the host, a baseline that ran
// out of memory (or was rejected) is tried once more with it there; after any other failure,
// or once tried, nothing is left.
TEST_F(FallbackTest, ABaselineOutOfMemoryIsRetriedWithTheOptimizerStateOnTheHost) {
  PlanSpec on_host = NamedBaselinePlan(8, 2);
  on_host.optimizer_state = StatePlacement::kHost;
  FallbackInput in =
      Input(AttemptOutcome::kOom, {{"good", PlanSource::kBaseline, NamedBaselinePlan(8, 2)}});
  in.baseline_on_host = on_host;
  FallbackDecision d = DecideFallback(in);
  ASSERT_TRUE(d.retry) << d.reason;
  EXPECT_EQ(d.source, PlanSource::kBaseline);
  EXPECT_EQ(d.plan, on_host);
  EXPECT_NE(d.reason.find("optimizer state on the host"), std::string::npos) << d.reason;

  in.tried.push_back({"good", PlanSource::kBaseline, on_host});
  EXPECT_FALSE(DecideFallback(in).retry);

  // The ledger step refuses a baseline over the budget before training: the same rung.
  in = Input(AttemptOutcome::kRejected, {{"good", PlanSource::kBaseline, NamedBaselinePlan(8, 2)}});
  in.baseline_on_host = on_host;
  d = DecideFallback(in);
  ASSERT_TRUE(d.retry) << d.reason;
  EXPECT_EQ(d.plan, on_host);

  in = Input(AttemptOutcome::kCrashed, {{"good", PlanSource::kBaseline, NamedBaselinePlan(8, 2)}});
  in.baseline_on_host = on_host;
  EXPECT_FALSE(DecideFallback(in).retry) << "a crash is not the model's state not fitting";

  in = Input(AttemptOutcome::kOom, {{"good", PlanSource::kBaseline, NamedBaselinePlan(8, 2)}});
  EXPECT_FALSE(DecideFallback(in).retry) << "planner.optimizer_states: [device]";
}

TEST_F(FallbackTest, ARejectedPlanWalksDownTheLadderLikeAnOom) {
  // The job's own plan is refused (over budget, or failed parity) -> the validated plan.
  FallbackInput in = Input(AttemptOutcome::kRejected, {{"good", PlanSource::kConfig, Plan(8, 1)}});
  in.validated_plan = Plan(4, 2);
  FallbackDecision d = DecideFallback(in);
  ASSERT_TRUE(d.retry) << d.reason;
  EXPECT_FALSE(d.mark_config_bad);
  EXPECT_FALSE(d.rolled_back);
  EXPECT_EQ(d.source, PlanSource::kValidated);
  EXPECT_EQ(d.plan, Plan(4, 2));
  EXPECT_NE(d.reason.find("after rejected"), std::string::npos) << d.reason;
  // Refused too -> a re-plan at a smaller budget -> the named baseline -> nothing left.
  in.tried.push_back({"good", PlanSource::kValidated, Plan(4, 2)});
  d = DecideFallback(in);
  ASSERT_TRUE(d.retry) << d.reason;
  EXPECT_EQ(d.source, PlanSource::kReplanSmaller);
  in.tried.push_back({"good", PlanSource::kReplanSmaller, Plan(2, 4)});
  d = DecideFallback(in);
  ASSERT_TRUE(d.retry) << d.reason;
  EXPECT_EQ(d.source, PlanSource::kBaseline);
  EXPECT_EQ(d.plan, NamedBaselinePlan(8, 2));
  in.tried.push_back({"good", PlanSource::kBaseline, NamedBaselinePlan(8, 2)});
  in.max_attempts = 10;
  d = DecideFallback(in);
  EXPECT_FALSE(d.retry);
  EXPECT_NE(d.reason.find("every fallback plan"), std::string::npos) << d.reason;
}

TEST_F(FallbackTest, ARejectedCandidateRollsBackToKnownGoodLikeAnOom) {
  FallbackInput in = Input(AttemptOutcome::kRejected, {{"cand", PlanSource::kConfig, Plan(8, 1)}});
  in.config_state = ConfigState::kCandidate;
  in.known_good_hash = "good";
  const FallbackDecision d = DecideFallback(in);
  EXPECT_TRUE(d.retry);
  EXPECT_TRUE(d.mark_config_bad);
  EXPECT_TRUE(d.rolled_back);
  EXPECT_EQ(d.config_hash, "good");
}

TEST_F(FallbackTest, AnAttemptTheDaemonStoppedIsNotRetried) {
  for (const AttemptOutcome o :
       {AttemptOutcome::kCancelled, AttemptOutcome::kDeadline, AttemptOutcome::kInterrupted}) {
    FallbackInput in = Input(o, {{"cand", PlanSource::kConfig, Plan(8, 1)}});
    in.config_state = ConfigState::kCandidate;
    in.known_good_hash = "good";
    const FallbackDecision d = DecideFallback(in);
    EXPECT_FALSE(d.retry) << ToString(o);
    EXPECT_FALSE(d.mark_config_bad) << ToString(o);
    EXPECT_FALSE(d.rolled_back) << ToString(o);
  }
}

TEST_F(FallbackTest, AValidatedPlanThatAlreadyFailedIsSkipped) {
  FallbackInput in = Input(AttemptOutcome::kLeak, {{"good", PlanSource::kConfig, Plan(4, 2)}});
  in.validated_plan = Plan(4, 2);  // the same plan as the job's own
  const FallbackDecision d = DecideFallback(in);
  ASSERT_TRUE(d.retry);
  EXPECT_EQ(d.source, PlanSource::kReplanSmaller);
}

TEST_F(FallbackTest, ABaselineAlreadyTriedIsSkipped) {
  FallbackInput in =
      Input(AttemptOutcome::kOom, {{"good", PlanSource::kConfig, NamedBaselinePlan(8, 2)},
                                   {"good", PlanSource::kReplanSmaller, Plan(2, 4)}});
  const FallbackDecision d = DecideFallback(in);
  EXPECT_FALSE(d.retry);
}

TEST_F(FallbackTest, CandidateWithoutKnownGoodRetriesItselfUntilTheLadderEnds) {
  FallbackInput in = Input(AttemptOutcome::kCrashed, {{"cand", PlanSource::kPlanner, Plan(8, 1)}});
  in.config_state = ConfigState::kCandidate;
  FallbackDecision d = DecideFallback(in);
  ASSERT_TRUE(d.retry);
  EXPECT_FALSE(d.mark_config_bad);
  EXPECT_EQ(d.source, PlanSource::kReplanSmaller);
  in.tried.push_back({"cand", PlanSource::kReplanSmaller, Plan(4, 2)});
  in.tried.push_back({"cand", PlanSource::kBaseline, NamedBaselinePlan(8, 2)});
  d = DecideFallback(in);
  EXPECT_FALSE(d.retry);
  EXPECT_TRUE(d.mark_config_bad);  // a candidate that fails for good is bad
}

TEST_F(FallbackTest, NoRetryWithoutTimeOrAttempts) {
  FallbackInput in = Input(AttemptOutcome::kOom, {{"good", PlanSource::kPlanner, Plan(8, 1)}});
  in.seconds_left = kMinimumAttemptSeconds - 1;
  FallbackDecision d = DecideFallback(in);
  EXPECT_FALSE(d.retry);
  EXPECT_NE(d.reason.find("before the deadline"), std::string::npos) << d.reason;
  in.seconds_left = 3600;
  in.max_attempts = 1;
  d = DecideFallback(in);
  EXPECT_FALSE(d.retry);
  EXPECT_NE(d.reason.find("max_attempts"), std::string::npos) << d.reason;
}

TEST(RegressionTest, OnlyACandidateIsMarkedBadAfterARegression) {
  EXPECT_TRUE(MarkBadAfterRegression(ConfigState::kCandidate));
  EXPECT_FALSE(MarkBadAfterRegression(ConfigState::kKnownGood));
}

store::RunRecord Baseline(double samples_per_second, std::string shapes) {
  store::RunRecord run;
  run.id = 7;
  run.samples_per_second = samples_per_second;
  run.shapes_json = std::move(shapes);
  return run;
}

TEST(CheckThroughputTest, RegressedOnlyBelowTheToleratedFloorOfAComparableBaseline) {
  EXPECT_FALSE(CheckThroughput(10, std::nullopt, "{}", 0.25).regressed);
  EXPECT_FALSE(CheckThroughput(10, Baseline(100, R"({"a":1})"), R"({"a":2})", 0.25).regressed);
  const ThroughputVerdict slow = CheckThroughput(74, Baseline(100, "{}"), "{}", 0.25);
  EXPECT_TRUE(slow.regressed);
  EXPECT_EQ(slow.baseline_run_id, 7);
  EXPECT_NE(slow.reason.find("run 7"), std::string::npos) << slow.reason;
  EXPECT_FALSE(CheckThroughput(76, Baseline(100, "{}"), "{}", 0.25).regressed);
  // A run that trained no update (resumed at the job's last checkpoint) measured nothing.
  const ThroughputVerdict unmeasured =
      CheckThroughput(std::nullopt, Baseline(100, "{}"), "{}", 0.25);
  EXPECT_FALSE(unmeasured.regressed);
  EXPECT_NE(unmeasured.reason.find("no throughput measured"), std::string::npos);
}

TEST(FinalSliceLossesTest, TakesEachSlicesLastUpdate) {
  const auto losses = FinalSliceLosses(
      {{"a", 50, 3.0}, {"a", 100, 2.0}, {"b", 100, 4.0}, {"b", 50, 5.0}, {"a", 10, 9.0}});
  EXPECT_EQ(losses.at("a"), 2.0);
  EXPECT_EQ(losses.at("b"), 4.0);
}

// Final evals of these losses, as the worker reports them without a baseline.
SliceEvals Losses(const std::map<std::string, double>& losses) {
  SliceEvals evals;
  for (const auto& [slice, loss] : losses) evals[slice] = {slice, 10, loss};
  return evals;
}

TEST(ReleaseGateTest, FirstReleasePassesWhenEveryLossIsFinite) {
  RegressionConfig r;
  EXPECT_TRUE(ReleaseGate(Losses({{"a", 2.0}}), std::nullopt, std::nullopt, false, r).pass);
  const GateVerdict nan = ReleaseGate(Losses({{"a", std::numeric_limits<double>::quiet_NaN()}}),
                                      std::nullopt, std::nullopt, false, r);
  EXPECT_FALSE(nan.pass);
  EXPECT_FALSE(ReleaseGate({}, std::nullopt, std::nullopt, false, r).pass);  // no evals, no release
}

TEST(ReleaseGateTest, EverySliceWithinItsToleranceOfTheCurrentRelease) {
  RegressionConfig r;
  r.eval_loss_tolerance = 0.02;
  r.slice_tolerances["b"] = 0.10;
  const SliceEvals reference = Losses({{"a", 2.0}, {"b", 3.0}});
  EXPECT_TRUE(ReleaseGate(Losses({{"a", 2.04}, {"b", 3.29}}), reference, 4, false, r).pass);
  const GateVerdict worse = ReleaseGate(Losses({{"a", 2.05}, {"b", 3.0}}), reference, 4, false, r);
  EXPECT_FALSE(worse.pass);
  EXPECT_NE(worse.reason.find("a"), std::string::npos) << worse.reason;
  EXPECT_FALSE(worse.slices[0].pass);
  EXPECT_TRUE(worse.slices[1].pass);
  EXPECT_FALSE(ReleaseGate(Losses({{"a", 2.0}, {"b", 3.31}}), reference, 4, false, r).pass);
  // A slice the release never had passes; a NaN never does.
  EXPECT_TRUE(ReleaseGate(Losses({{"a", 2.0}, {"c", 99.0}}), reference, 4, false, r).pass);
  EXPECT_FALSE(ReleaseGate(Losses({{"a", std::nan("")}}), reference, 4, false, r).pass);
  EXPECT_FALSE(ReleaseGate(Losses({{"a", 2.0}}), Losses({{"a", std::nan("")}}), 4, false, r).pass)
      << "nor against a reference that is not a number";
}

TEST(ReleaseGateTest, EverySliceBelowTheSimpleBaseline) {
  RegressionConfig r;
  SliceEvals evals = Losses({{"a", 2.0}, {"b", 3.0}});
  evals["a"].baseline_loss = 2.5;
  evals["b"].baseline_loss = 3.0;  // equal is not below
  const GateVerdict first = ReleaseGate(evals, std::nullopt, std::nullopt, false, r);
  EXPECT_FALSE(first.pass);
  EXPECT_TRUE(first.slices[0].pass);
  EXPECT_FALSE(first.slices[1].beats_baseline);
  EXPECT_EQ(first.reason,
            "eval loss not 1% below the simple baseline's on: b (3.0000 against 3.0000)");
  // Below it, but not by the margin (1% of the baseline's loss by default): a model that
  // learned only the class frequencies comes this close.
  evals["b"].baseline_loss = 3.02;
  EXPECT_FALSE(ReleaseGate(evals, std::nullopt, std::nullopt, false, r).pass);
  r.baseline_margin = 0;
  EXPECT_TRUE(ReleaseGate(evals, std::nullopt, std::nullopt, false, r).pass);
  r.baseline_margin = 0.01;
  // Within tolerance of the release does not excuse it; a slice without a baseline has
  // nothing to beat.
  evals["b"].baseline_loss = std::nullopt;
  EXPECT_TRUE(ReleaseGate(evals, Losses({{"a", 2.0}, {"b", 3.0}}), 4, false, r).pass);
  evals["a"].baseline_loss = 1.9;
  const GateVerdict against_release = ReleaseGate(evals, Losses({{"a", 2.0}}), 4, false, r);
  EXPECT_FALSE(against_release.pass);
  EXPECT_EQ(against_release.slices[0].reference, 2.0);
  EXPECT_EQ(against_release.slices[0].baseline, 1.9);
  // A job may turn the test off.
  r.beat_baseline = false;
  EXPECT_TRUE(ReleaseGate(evals, Losses({{"a", 2.0}}), 4, false, r).pass);
}

// Final evals of `loss` over windows of one term each whose losses are `loss` +- `spread`.
store::SliceEval Windowed(double loss, double spread) {
  const std::vector<double> sums = {loss - spread, loss + spread, loss - spread, loss + spread};
  return {"a", 10, loss, std::nullopt, "", ToJson(WindowLosses{sums, {1, 1, 1, 1}}).dump()};
}

TEST(ReleaseGateTest, BeyondTheToleranceButWithinTheNoisePassesAndSaysSo) {
  RegressionConfig r;  // 2% tolerance, 95% one-sided
  const SliceEvals reference{{"a", Windowed(2.0, 0.5)}};
  // 2.1 is 0.06 beyond 2.04; the difference's standard error, from windows as spread as
  // these, is ~0.4: within the noise.
  const GateVerdict noisy = ReleaseGate({{"a", Windowed(2.1, 0.5)}}, reference, 4, false, r);
  EXPECT_TRUE(noisy.pass) << noisy.reason;
  EXPECT_TRUE(noisy.slices[0].within_noise);
  EXPECT_FALSE(noisy.slices[0].paired);
  EXPECT_NEAR(*noisy.slices[0].standard_error, std::sqrt(4.0 / 3 * 0.25) / 2, 1e-12);
  EXPECT_NE(noisy.reason.find("beyond tolerance but within the noise (one-sided, at 95% "
                              "confidence) on: a"),
            std::string::npos)
      << noisy.reason;
  // Judged as if without noise (confidence 50%), the same loss holds the model back.
  r.gate_confidence = 0.5;
  EXPECT_FALSE(ReleaseGate({{"a", Windowed(2.1, 0.5)}}, reference, 4, false, r).pass);
  r.gate_confidence = 0.95;
  // Windows that agree closely leave no room: held back beyond tolerance and noise.
  const GateVerdict steady = ReleaseGate({{"a", Windowed(2.1, 0.01)}},
                                         SliceEvals{{"a", Windowed(2.0, 0.01)}}, 4, false, r);
  EXPECT_FALSE(steady.pass);
  EXPECT_FALSE(steady.slices[0].within_noise);
  EXPECT_NE(steady.reason.find("beyond tolerance (and the noise, where measured, one-sided, at "
                               "95% confidence) on: a"),
            std::string::npos)
      << steady.reason;
  // Without the reference's windows (a release recorded before them), the tolerance alone.
  EXPECT_FALSE(ReleaseGate({{"a", Windowed(2.1, 0.5)}}, Losses({{"a", 2.0}}), 4, false, r).pass);
}

TEST(ReleaseGateTest, OnTheSameHeldOutWindowsTheDifferenceIsPaired) {
  RegressionConfig r;
  // The windows spread widely, but the candidate is worse by 5% on every one of them: as
  // independent samples that is noise, window by window it is not.
  const SliceEvals reference{{"a", Windowed(2.0, 0.5)}};
  store::SliceEval worse = Windowed(2.1, 0.5);
  worse.windows_json = ToJson(WindowLosses{{1.575, 2.625, 1.575, 2.625}, {1, 1, 1, 1}}).dump();
  EXPECT_TRUE(ReleaseGate({{"a", worse}}, reference, 4, false, r).pass);
  const GateVerdict paired = ReleaseGate({{"a", worse}}, reference, 4, true, r);
  EXPECT_FALSE(paired.pass);
  EXPECT_TRUE(paired.slices[0].paired);
  EXPECT_LT(*paired.slices[0].difference_standard_error, 0.01);
}

TEST(ReleaseGateTest, PredictionDivergenceFromTheReferenceJudgesNothing) {
  RegressionConfig r;
  SliceEvals evals = Losses({{"a", 2.0}, {"b", 2.0}});
  SliceEvals reference = Losses({{"a", 2.0}, {"b", 2.0}});
  evals["a"].predictions_json = R"({"entropy":[1,1],"top1":[1,0],"classes":[]})";
  reference["a"].predictions_json = R"({"entropy":[1,1],"top1":[0,1],"classes":[]})";
  reference["b"].predictions_json = reference["a"].predictions_json;  // b's run has none
  const GateVerdict gate = ReleaseGate(evals, reference, 4, false, r);
  EXPECT_TRUE(gate.pass);
  EXPECT_DOUBLE_EQ(*gate.slices[0].prediction_divergence, 1.0) << "the largest histogram's";
  EXPECT_EQ(gate.slices[1].prediction_divergence, std::nullopt);
  EXPECT_EQ(PredictionDivergence(R"({"mean":1.5,"spread":0.5})", R"({"mean":1,"spread":1})"),
            std::nullopt)
      << "an mse model's summary has no histogram";
}

TEST(ReleaseGateTest, DetailsJsonNamesEverySlice) {
  RegressionConfig r;
  SliceEvals evals = Losses({{"GPL-3", 2.5}});
  evals["GPL-3"].baseline_loss = 3.25;
  const std::string json = ReleaseGate(evals, Losses({{"GPL-3", 2.0}}), 3, false, r).ToJson();
  EXPECT_NE(json.find("\"GPL-3\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"reference_run_id\":3"), std::string::npos) << json;
  EXPECT_NE(json.find("\"pass\":false"), std::string::npos) << json;
  EXPECT_NE(json.find("\"baseline\":3.25"), std::string::npos) << json;
}

}  // namespace
TEST(ModelRollbackTargetTest, IsTheNewestEarlierGatePassedReleaseNeitherWithdrawnNorRemoved) {
  std::vector<store::Release> releases(6);
  for (std::size_t i = 0; i < releases.size(); ++i) {
    releases[i].id = static_cast<std::int64_t>(i) + 1;
    releases[i].gate_passed = true;
  }
  EXPECT_EQ(ModelRollbackTarget(releases), std::nullopt) << "no current release";
  releases[4].current = true;         // 5
  releases[3].withdrawn_json = "{}";  // 4
  releases[2].files_removed_at = 9;   // 3
  releases[1].gate_passed = false;    // 2
  EXPECT_EQ(ModelRollbackTarget(releases), 1);
  releases[0].gate_passed = false;
  EXPECT_EQ(ModelRollbackTarget(releases), std::nullopt);
}

}  // namespace trainerd::daemon
