#include <gtest/gtest.h>

#include <set>
#include <string>

#include "deploy_test_util.h"

namespace trainerd::deploy::testing {
namespace {

using Names = std::set<std::string>;

TEST(DeployPromqlMetricNamesTest, SelectorsWithMatchersAndRanges) {
  EXPECT_EQ(PromqlMetricNames(R"(trainerd_memory_peak_bytes{category!="peak", x=~"a}b"})"),
            Names{"trainerd_memory_peak_bytes"});
  EXPECT_EQ(PromqlMetricNames("rate(foo_total[5m:1m]) / bar offset 1h"),
            (Names{"foo_total", "bar"}));
}

TEST(DeployPromqlMetricNamesTest, SkipsFunctionsAggregationsAndLabelLists) {
  EXPECT_EQ(PromqlMetricNames(
                R"(sum by (outcome) (increase(trainerd_runs_total{instance="$instance"}[1d])))"),
            Names{"trainerd_runs_total"});
  EXPECT_EQ(PromqlMetricNames("sum(x) without (le) / on(a) group_left(b) y"), (Names{"x", "y"}));
  EXPECT_EQ(PromqlMetricNames(R"(up{job="trainerd"} == 1
                                   unless on (job, instance) last_success > bool 0)"),
            (Names{"up", "last_success"}));
}

TEST(DeployPromqlMetricNamesTest, SkipsStringsNumbersAndKeywords) {
  EXPECT_EQ(
      PromqlMetricNames(R"(label_replace(increase(a_total[1d]) > 0, "reason", "oom", "", ""))"),
      Names{"a_total"});
  EXPECT_EQ(PromqlMetricNames("time() - ts > 26 * 3600 and ts > 1e3 or vector(0)"), Names{"ts"});
  EXPECT_EQ(PromqlMetricNames("1 + 2"), Names{});
}

}  // namespace
}  // namespace trainerd::deploy::testing
