// deploy/prometheus: the scrape config, the alert rules and their promtool unit tests.
// promtool itself checks the syntax and runs the unit tests (ctest deploy_alert_rules_*);
// these tests check what promtool does not: names, labels, annotations and coverage.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <cctype>
#include <map>
#include <set>
#include <string>

#include "deploy_test_util.h"

namespace trainerd::deploy::testing {
namespace {

YAML::Node LoadDeployFile(const std::string& relative) {
  const std::string path = SourcePath(relative);
  if (path.empty()) {
    ADD_FAILURE() << "TRAINERD_SOURCE_DIR is not set: run this test with ctest";
    return YAML::Node();
  }
  try {
    return YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    ADD_FAILURE() << path << ": " << e.what();
    return YAML::Node();
  }
}

class DeployAlertRulesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const YAML::Node rules = LoadDeployFile("deploy/prometheus/trainerd-alerts.yml");
    ASSERT_TRUE(rules["groups"].IsSequence());
    for (const YAML::Node& group : rules["groups"]) {
      for (const YAML::Node& rule : group["rules"]) {
        if (rule["alert"]) alerts_[rule["alert"].as<std::string>()] = rule;
      }
    }
    ASSERT_FALSE(alerts_.empty());
  }

  std::map<std::string, YAML::Node> alerts_;  // By alert name.
};

TEST_F(DeployAlertRulesTest, HasTheRequiredAlerts) {
  for (const char* name :
       {"TrainerdDown", "TrainerdMissedWindow", "TrainerdNoSuccessfulRun", "TrainerdOomOrFallback",
        "TrainerdWindowMarginNegative", "TrainerdMemoryLeak", "TrainerdRollback",
        "TrainerdOutcomeRegression", "TrainerdDataQualityBreach"}) {
    EXPECT_TRUE(alerts_.count(name)) << "no alert " << name;
  }
}

TEST_F(DeployAlertRulesTest, EveryAlertHasSeverityAndAnnotations) {
  for (const auto& [name, rule] : alerts_) {
    const std::string severity = rule["labels"]["severity"].as<std::string>("");
    EXPECT_TRUE(severity == "critical" || severity == "warning") << name << ": " << severity;
    EXPECT_FALSE(rule["annotations"]["summary"].as<std::string>("").empty()) << name;
    EXPECT_FALSE(rule["annotations"]["description"].as<std::string>("").empty()) << name;
  }
}

// runbook_url: the alert's own section of docs/operations.md ("### <Alert>") in the copy the
// package installs.
TEST_F(DeployAlertRulesTest, EveryAlertLinksToItsSectionOfTheOperatorsGuide) {
  const std::string guide = ReadFile(SourcePath("docs/operations.md"));
  ASSERT_FALSE(guide.empty());
  for (const auto& [name, rule] : alerts_) {
    std::string anchor = name;
    for (char& c : anchor) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    EXPECT_EQ(rule["annotations"]["runbook_url"].as<std::string>(""),
              "file:///usr/share/doc/trainerd/operations.md#" + anchor)
        << name;
    EXPECT_NE(guide.find("\n### " + name + "\n"), std::string::npos)
        << "docs/operations.md has no section '### " << name << "'";
  }
}

TEST_F(DeployAlertRulesTest, SelectOnlyExportedMetrics) {
  for (const auto& [name, rule] : alerts_) {
    const std::string expr = rule["expr"].as<std::string>("");
    const std::set<std::string> names = PromqlMetricNames(expr);
    EXPECT_FALSE(names.empty()) << name;
    for (const std::string& metric : names) {
      EXPECT_TRUE(ExportedMetrics().count(metric))
          << name << " selects " << metric << ", which trainerd does not export";
    }
    // `up` of other jobs is not trainerd's business.
    if (names.count("up")) {
      EXPECT_NE(expr.find(R"(up{job="trainerd"})"), std::string::npos) << name;
    }
  }
}

// Each alert needs a promtool test case where it fires and one where it stays silent.
TEST_F(DeployAlertRulesTest, EveryAlertIsTestedFiringAndNotFiring) {
  const YAML::Node tests = LoadDeployFile("deploy/prometheus/trainerd-alerts.test.yml");
  ASSERT_TRUE(tests["tests"].IsSequence());
  std::set<std::string> fires, silent;
  for (const YAML::Node& test : tests["tests"]) {
    for (const YAML::Node& check : test["alert_rule_test"]) {
      const std::string name = check["alertname"].as<std::string>("");
      const YAML::Node expected = check["exp_alerts"];
      (expected && expected.size() > 0 ? fires : silent).insert(name);
    }
  }
  for (const auto& [name, rule] : alerts_) {
    EXPECT_TRUE(fires.count(name)) << name << " has no test case where it fires";
    EXPECT_TRUE(silent.count(name)) << name << " has no test case where it stays silent";
  }
}

TEST(DeployPrometheusConfigTest, ScrapesTrainerdAndLoadsTheAlertRules) {
  const YAML::Node config = LoadDeployFile("deploy/prometheus/prometheus.yml");
  bool loads_rules = false;
  for (const YAML::Node& file : config["rule_files"]) {
    loads_rules |= file.as<std::string>("") == "trainerd-alerts.yml";
  }
  EXPECT_TRUE(loads_rules) << "prometheus.yml does not load trainerd-alerts.yml";

  bool scrapes = false;
  for (const YAML::Node& job : config["scrape_configs"]) {
    if (job["job_name"].as<std::string>("") != "trainerd") continue;
    EXPECT_EQ(job["scrape_interval"].as<std::string>(""), "15s");
    for (const YAML::Node& static_config : job["static_configs"]) {
      for (const YAML::Node& target : static_config["targets"]) {
        scrapes |= target.as<std::string>("") == "127.0.0.1:9464";
      }
    }
  }
  EXPECT_TRUE(scrapes) << "no job \"trainerd\" scraping 127.0.0.1:9464";
}

}  // namespace
}  // namespace trainerd::deploy::testing
