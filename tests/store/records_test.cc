#include "trainerd/store/records.h"

#include <gtest/gtest.h>

namespace trainerd::store {
namespace {

TEST(RecordsTest, RunStatusNamesRoundTrip) {
  for (RunStatus status :
       {RunStatus::kScheduled, RunStatus::kRunning, RunStatus::kSucceeded, RunStatus::kOom,
        RunStatus::kCrashed, RunStatus::kLeak, RunStatus::kDeadline, RunStatus::kRegressed,
        RunStatus::kCancelled, RunStatus::kInterrupted, RunStatus::kRejected}) {
    Result<RunStatus> parsed = ParseRunStatus(ToString(status));
    ASSERT_TRUE(parsed.ok()) << parsed.status().message();
    EXPECT_EQ(*parsed, status);
  }
  EXPECT_EQ(ToString(RunStatus::kOom), "oom");
  EXPECT_EQ(ToString(RunStatus::kInterrupted), "interrupted");
  EXPECT_EQ(ToString(RunStatus::kRejected), "rejected");
}

TEST(RecordsTest, ConfigStateAndSeverityNamesRoundTrip) {
  for (ConfigState state : {ConfigState::kCandidate, ConfigState::kKnownGood, ConfigState::kBad}) {
    Result<ConfigState> parsed = ParseConfigState(ToString(state));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, state);
  }
  for (Severity severity : {Severity::kInfo, Severity::kWarning, Severity::kError}) {
    Result<Severity> parsed = ParseSeverity(ToString(severity));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, severity);
  }
  EXPECT_EQ(ToString(ConfigState::kKnownGood), "known-good");
}

TEST(RecordsTest, UnknownNameIsInvalidArgumentListingTheChoices) {
  Result<RunStatus> parsed = ParseRunStatus("finished");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(parsed.status().message().find("'finished'"), std::string::npos);
  EXPECT_NE(parsed.status().message().find("succeeded"), std::string::npos);
  EXPECT_FALSE(ParseConfigState("Known-Good").ok());
  EXPECT_FALSE(ParseSeverity("").ok());
}

TEST(RecordsTest, OnlyScheduledAndRunningAreUnfinished) {
  EXPECT_FALSE(IsFinished(RunStatus::kScheduled));
  EXPECT_FALSE(IsFinished(RunStatus::kRunning));
  EXPECT_TRUE(IsFinished(RunStatus::kSucceeded));
  EXPECT_TRUE(IsFinished(RunStatus::kOom));
  EXPECT_TRUE(IsFinished(RunStatus::kInterrupted));
  EXPECT_TRUE(IsFinished(RunStatus::kRejected));
}

}  // namespace
}  // namespace trainerd::store
