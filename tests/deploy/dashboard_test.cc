// deploy/grafana: the dashboard JSON and the provisioning files that load it.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "../support/temp_dir.h"
#include "deploy_test_util.h"

namespace trainerd::deploy::testing {
namespace {

using nlohmann::json;

// Every query names its datasource through the dashboard's datasource variable, so the
// dashboard works with whichever Prometheus datasource a Grafana has (not one fixed uid).
constexpr char kDatasourceUid[] = "${datasource}";
// Where the dashboard provider looks, and so where the README says to copy the JSON.
constexpr char kDashboardDir[] = "/var/lib/grafana/dashboards/trainerd";

// Grafana replaces these before sending a query; promtool needs a real duration.
std::string SubstituteGrafanaIntervals(std::string expr) {
  static const std::regex kIntervals(R"(\$__(rate_interval|interval|range)\b)");
  return std::regex_replace(expr, kIntervals, "5m");
}

class DeployDashboardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string path = SourcePath("deploy/grafana/dashboards/trainerd.json");
    ASSERT_FALSE(path.empty()) << "TRAINERD_SOURCE_DIR is not set: run this test with ctest";
    const std::string text = ReadFile(path);
    ASSERT_FALSE(text.empty()) << "cannot read " << path;
    dashboard_ = json::parse(text, nullptr, /*allow_exceptions=*/false);
    ASSERT_FALSE(dashboard_.is_discarded()) << path << " is not valid JSON";
    ASSERT_TRUE(dashboard_.contains("panels") && dashboard_["panels"].is_array());
    // Rows hold no queries; a collapsed row carries its panels inside it.
    for (const json& panel : dashboard_["panels"]) {
      if (panel.value("type", "") != "row") panels_.push_back(&panel);
      for (const json& inner : panel.value("panels", json::array())) panels_.push_back(&inner);
    }
    ASSERT_FALSE(panels_.empty());
  }

  // Every query of every panel, ready for promtool.
  std::vector<std::string> Exprs() const {
    std::vector<std::string> exprs;
    for (const json* panel : panels_) {
      for (const json& target : panel->value("targets", json::array())) {
        exprs.push_back(SubstituteGrafanaIntervals(target.value("expr", "")));
      }
    }
    return exprs;
  }

  const json* PanelTitled(const std::string& title) const {
    for (const json* panel : panels_) {
      if (panel->value("title", "") == title) return panel;
    }
    return nullptr;
  }

  json dashboard_;
  std::vector<const json*> panels_;
};

TEST_F(DeployDashboardTest, IsAGrafanaDashboard) {
  EXPECT_FALSE(dashboard_.value("title", "").empty());
  EXPECT_EQ(dashboard_.value("uid", ""), "trainerd");
  ASSERT_TRUE(dashboard_.contains("schemaVersion") && dashboard_["schemaVersion"].is_number());
  EXPECT_GE(dashboard_["schemaVersion"].get<int>(), 36);
  EXPECT_LE(dashboard_["schemaVersion"].get<int>(), 39);
  std::set<int> ids;
  for (const json* panel : panels_) {
    const std::string title = panel->value("title", "");
    EXPECT_FALSE(title.empty()) << panel->dump();
    ASSERT_TRUE(panel->contains("id") && (*panel)["id"].is_number_integer()) << title;
    EXPECT_TRUE(ids.insert((*panel)["id"].get<int>()).second) << "duplicate id in " << title;
    EXPECT_FALSE(panel->value("type", "").empty()) << title;
    const json grid = panel->value("gridPos", json::object());
    for (const char* key : {"h", "w", "x", "y"}) {
      ASSERT_TRUE(grid.contains(key) && grid[key].is_number_integer()) << title << " " << key;
    }
    EXPECT_GE(grid["x"].get<int>(), 0) << title;
    EXPECT_LE(grid["x"].get<int>() + grid["w"].get<int>(), 24) << title;
  }
}

TEST_F(DeployDashboardTest, EveryPanelQueriesThePrometheusDatasource) {
  for (const json* panel : panels_) {
    const std::string title = panel->value("title", "");
    const json datasource = panel->value("datasource", json::object());
    EXPECT_EQ(datasource.value("uid", ""), kDatasourceUid) << title;
    EXPECT_EQ(datasource.value("type", ""), "prometheus") << title;
    const json targets = panel->value("targets", json::array());
    EXPECT_FALSE(targets.empty()) << title << " has no query";
    std::set<std::string> ref_ids;
    for (const json& target : targets) {
      ASSERT_TRUE(target.contains("expr") && target["expr"].is_string()) << title;
      EXPECT_FALSE(target["expr"].get<std::string>().empty()) << title;
      EXPECT_TRUE(ref_ids.insert(target.value("refId", "")).second)
          << title << ": refIds must be unique";
      if (target.contains("datasource")) {
        EXPECT_EQ(target["datasource"].value("uid", ""), kDatasourceUid) << title;
      }
    }
  }
  int datasource_variables = 0;
  for (const json& variable : dashboard_["templating"].value("list", json::array())) {
    if (variable.value("type", "") == "datasource") {
      ++datasource_variables;
      EXPECT_EQ(variable.value("name", ""), "datasource") << variable.dump();
      EXPECT_EQ(variable.value("query", ""), "prometheus") << variable.dump();
    }
    if (variable.value("type", "") != "query") continue;
    EXPECT_EQ(variable["datasource"].value("uid", ""), kDatasourceUid) << variable.dump();
  }
  EXPECT_EQ(datasource_variables, 1);
}

TEST_F(DeployDashboardTest, HasThePanelsOperatorsNeed) {
  for (const char* title :
       {"Peak memory by category", "Training throughput", "MFU", "Cost per sample",
        "Train and eval loss", "Window margin", "Run outcomes", "Fallbacks and rollbacks by reason",
        "Run in progress", "Last success age"}) {
    EXPECT_NE(PanelTitled(title), nullptr) << "no panel titled \"" << title << "\"";
  }
}

// The point of the memory panel: the ledger categories stacked up to the measured peak, with
// the budget and the usable bytes as unstacked lines to compare the stack with.
TEST_F(DeployDashboardTest, PeakMemoryIsStackedAgainstBudgetAndUsable) {
  const json* panel = PanelTitled("Peak memory by category");
  ASSERT_NE(panel, nullptr);
  EXPECT_EQ(panel->value("type", ""), "timeseries");
  const json defaults = (*panel)["fieldConfig"]["defaults"];
  EXPECT_EQ(defaults.value("unit", ""), "bytes");
  EXPECT_EQ(defaults["custom"]["stacking"].value("mode", ""), "normal");

  std::map<std::string, std::string> expr_by_legend;
  for (const json& target : (*panel)["targets"]) {
    expr_by_legend[target.value("legendFormat", "")] = target.value("expr", "");
  }
  ASSERT_TRUE(expr_by_legend.count("{{category}}"));
  // The ledger's categories only: the peak is its own series, so the stack is the ledger.
  EXPECT_NE(expr_by_legend["{{category}}"].find("trainerd_memory_ledger_bytes"), std::string::npos);
  ASSERT_TRUE(expr_by_legend.count("budget"));
  EXPECT_NE(expr_by_legend["budget"].find("trainerd_memory_budget_bytes"), std::string::npos);
  ASSERT_TRUE(expr_by_legend.count("usable"));
  EXPECT_NE(expr_by_legend["usable"].find("trainerd_memory_usable_bytes"), std::string::npos);

  // Each limit line is taken out of the stack by an override that matches its name.
  for (const std::string name : {"budget", "usable"}) {
    bool unstacked = false;
    for (const json& override_ : (*panel)["fieldConfig"].value("overrides", json::array())) {
      const std::string matcher = override_["matcher"].value("id", "");
      const std::string option = override_["matcher"].value("options", "");
      const bool matches = (matcher == "byName" && option == name) ||
                           (matcher == "byRegexp" && std::regex_search(name, std::regex(option)));
      if (!matches) continue;
      for (const json& property : override_["properties"]) {
        if (property.value("id", "") == "custom.stacking" &&
            property["value"].value("mode", "") == "none")
          unstacked = true;
      }
    }
    EXPECT_TRUE(unstacked) << "\"" << name << "\" is stacked on the ledger categories";
  }
}

// promtool parses every query as the expression of a recording rule.
TEST_F(DeployDashboardTest, EveryExprIsValidPromql) {
  std::string error;
  const std::string promtool = Promtool(&error);
  ASSERT_FALSE(promtool.empty()) << error;
  trainerd::testing::TempDir dir;

  // The check must be able to fail: an unbalanced call is rejected.
  const std::string invalid =
      dir.Write("invalid.yml", "groups:\n- name: g\n  rules:\n  - record: r\n    expr: sum(\n");
  EXPECT_NE(RunCommand({promtool, "check", "rules", invalid}).exit_code, 0);

  const std::vector<std::string> exprs = Exprs();
  ASSERT_FALSE(exprs.empty());
  std::string rules = "groups:\n  - name: dashboard\n    rules:\n";
  for (std::size_t i = 0; i < exprs.size(); ++i) {
    // A JSON string is a YAML double-quoted scalar.
    rules += "      - record: dashboard:expr_" + std::to_string(i) +
             "\n        expr: " + json(exprs[i]).dump() + "\n";
  }
  const std::string file = dir.Write("dashboard-rules.yml", rules);
  const CommandResult result = RunCommand({promtool, "check", "rules", file});
  EXPECT_EQ(result.exit_code, 0) << result.output << "\n" << rules;
  EXPECT_NE(result.output.find(std::to_string(exprs.size()) + " rules found"), std::string::npos)
      << result.output;
}

TEST_F(DeployDashboardTest, SelectsOnlyExportedMetricsAndShowsEveryOne) {
  std::set<std::string> used;
  for (const std::string& expr : Exprs()) {
    const std::set<std::string> names = PromqlMetricNames(expr);
    EXPECT_FALSE(names.empty()) << "no metric in: " << expr;
    for (const std::string& name : names) {
      EXPECT_TRUE(ExportedMetrics().count(name)) << name << " is not exported, in: " << expr;
      used.insert(name);
    }
  }
  // Variables: label_values(SELECTOR, LABEL).
  static const std::regex kLabelValues(R"(label_values\(([^,]+),)");
  for (const json& variable : dashboard_["templating"].value("list", json::array())) {
    std::smatch match;
    const std::string definition = variable.value("definition", "");
    if (!std::regex_search(definition, match, kLabelValues)) continue;
    for (const std::string& name : PromqlMetricNames(match[1].str())) {
      EXPECT_TRUE(ExportedMetrics().count(name)) << name << " is not exported, in " << definition;
    }
  }
  for (const std::string& name : ExportedMetrics()) {
    EXPECT_TRUE(used.count(name)) << name << " is exported but no panel shows it";
  }
}

// The provisioned Prometheus datasource is the default one, which the dashboard's datasource
// variable selects until an operator picks another.
TEST(DeployGrafanaProvisioningTest, DatasourceIsTheDefaultPrometheusTheDashboardVariableSelects) {
  const std::string path = SourcePath("deploy/grafana/provisioning/datasources/trainerd.yml");
  ASSERT_FALSE(path.empty()) << "TRAINERD_SOURCE_DIR is not set: run this test with ctest";
  YAML::Node config;
  ASSERT_NO_THROW(config = YAML::LoadFile(path)) << path;
  EXPECT_EQ(config["apiVersion"].as<int>(0), 1);
  ASSERT_TRUE(config["datasources"].IsSequence()) << path;
  int defaults = 0;
  for (const YAML::Node& datasource : config["datasources"]) {
    if (!datasource["isDefault"].as<bool>(false)) continue;
    ++defaults;
    EXPECT_EQ(datasource["type"].as<std::string>(""), "prometheus");
    EXPECT_FALSE(datasource["url"].as<std::string>("").empty());
  }
  EXPECT_EQ(defaults, 1) << "one default datasource in " << path;
}

TEST(DeployGrafanaProvisioningTest, ProviderLoadsTheDirectoryTheReadmeInstallsTo) {
  const std::string path = SourcePath("deploy/grafana/provisioning/dashboards/trainerd.yml");
  ASSERT_FALSE(path.empty()) << "TRAINERD_SOURCE_DIR is not set: run this test with ctest";
  YAML::Node config;
  ASSERT_NO_THROW(config = YAML::LoadFile(path)) << path;
  EXPECT_EQ(config["apiVersion"].as<int>(0), 1);
  ASSERT_TRUE(config["providers"].IsSequence() && config["providers"].size() == 1) << path;
  const YAML::Node provider = config["providers"][0];
  EXPECT_EQ(provider["type"].as<std::string>(""), "file");
  EXPECT_EQ(provider["options"]["path"].as<std::string>(""), kDashboardDir);

  const std::string readme = ReadFile(SourcePath("deploy/README.md"));
  EXPECT_NE(readme.find(kDashboardDir), std::string::npos)
      << "deploy/README.md does not say to install the dashboard in " << kDashboardDir;
}

}  // namespace
}  // namespace trainerd::deploy::testing
