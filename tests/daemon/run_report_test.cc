// The run report: facts gathered from a real SQLite run store (a night of two attempts, an
// unrelated night beside it), and the page drawn from them, read back from its HTML.
#include "trainerd/daemon/run_report.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "../support/temp_dir.h"
#include "trainerd/daemon/report_page.h"
#include "trainerd/store/store.h"

namespace trainerd::daemon {
namespace {

using Json = nlohmann::json;

constexpr std::int64_t kBudget = 64 << 20;
constexpr std::int64_t kUsable = kBudget * 9 / 10;

store::MemoryByCategory Memory() {
  store::MemoryByCategory m;
  m.parameters = 3'500'000;
  m.gradients = 3'500'000;
  m.optimizer_state = 7'000'000;
  m.activations = 39'000'000;
  m.temporaries = 1'000'000;
  m.inputs = 65'536;
  m.peak = 52'000'000;
  return m;
}

class RunReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<std::unique_ptr<store::Store>> opened = store::Store::Open(dir_.File("trainerd.db"));
    ASSERT_TRUE(opened.ok()) << opened.status().message();
    store_ = std::move(*opened);
    ASSERT_TRUE(store_->RecordConfigVersion({"cfg", "yaml", 1, {}}).ok());
  }

  store::Event At(std::int64_t run, const std::string& kind, store::Severity severity,
                  const std::string& message, const Json& details = Json::object()) {
    return {0, 10, run, kind, severity, message, details.dump()};
  }

  // A finished run of the config with `plan`, its events recorded in order.
  std::int64_t Run(store::RunStatus status, std::optional<std::int64_t> fallback_of,
                   const PlanSpec& plan, std::vector<store::Event> events,
                   std::vector<store::UpdateMetric> metrics = {},
                   std::vector<store::SliceEval> evals = {}) {
    store::RunRecord run;
    run.config_hash = "cfg";
    run.fallback_of = fallback_of;
    run.created_at = 5;
    run.deadline_at = 9999;
    Result<std::int64_t> id = store_->CreateRun(run);
    EXPECT_TRUE(id.ok());
    run.id = *id;
    EXPECT_TRUE(store_->MarkRunStarted(run.id, 6).ok());
    EXPECT_TRUE(store_->SetRunPlan(run.id, plan).ok());
    run.status = status;
    run.started_at = 6;
    run.ended_at = 60;
    run.plan = plan;
    run.shapes_json = R"({"effective_batch": 32})";
    if (status == store::RunStatus::kSucceeded) {
      run.peak_memory = Memory();
      run.samples_per_second = 256;
    }
    for (store::Event& e : events) e.run_id = run.id;
    EXPECT_TRUE(store_->FinishRun(run, metrics, evals, events).ok());
    return run.id;
  }

  // Night one: run 1 (naive plan) runs out of memory, run 2 replaces it with the planner's
  // plan, trains 1200 updates and is released. Night two: run 3, alone.
  void RecordTwoNights() {
    const PlanSpec naive{32, 1, {}, Precision::kFp32};
    const std::int64_t first =
        Run(store::RunStatus::kOom, std::nullopt, naive,
            {At(0, "run_started", store::Severity::kInfo, "started", {{"plan_source", "config"}}),
             At(0, "run_oom", store::Severity::kError, "the worker ran out of memory")});
    std::vector<store::UpdateMetric> metrics;
    for (int u = 1; u <= 1200; ++u) metrics.push_back({u, 5.0 - u / 600.0, 1e-3, 1, 250, 1 << 20});
    std::vector<store::SliceEval> evals;
    for (int u : {400, 800, 1200}) {
      evals.push_back({"GPL-3", u, 4.0 - u / 1000.0});
      evals.push_back({"Apache-2.0", u, 4.2 - u / 1000.0});
    }
    const Json planner = {
        {"microbatch", 16},
        {"accumulation_steps", 2},
        {"checkpoint_blocks", {1}},
        {"precision", "bf16"},
        {"predicted_peak_bytes", 50'000'000},
        {"predicted_update_seconds", 0.125},
        {"measured_update_seconds", 0.1},
        {"probe_seconds", 2.0},
        {"predicted_duration_seconds", 120.0},  // measured x 1200 updates
        {"modelled_duration_seconds", 150.0},   // the time model's x 1200 updates
        {"window_seconds", 21600.0},
        {"rejected",
         {{{"microbatch", 32},
           {"accumulation_steps", 1},
           {"checkpoint_blocks", Json::array()},
           {"precision", "bf16"},
           {"predicted_peak_bytes", 124'000'000},
           {"predicted_duration_seconds", 140.0},
           {"reason", "predicted peak <script>alert(1)</script> exceeds usable"}}}}};
    const Json ledger = {{"budget_bytes", kBudget},
                         {"usable_bytes", kUsable},
                         {"peak_bytes", 52'000'000},
                         {"blocks",
                          {{{"index", 0},
                            {"activation_bytes", 9'000'000},
                            {"checkpointed_activation_bytes", 500'000}},
                           {{"index", 1},
                            {"activation_bytes", 9'000'000},
                            {"checkpointed_activation_bytes", 500'000}}}}};
    const Json gate = {{"pass", true},
                       {"reason", "no current release"},
                       {"slices",
                        {{{"slice", "GPL-3"},
                          {"loss", 2.8},
                          {"standard_error", 0.05},
                          {"reference", nullptr},
                          {"tolerance", 0.02},
                          {"within_noise", true},
                          {"pass", true}}}}};
    second_ = Run(store::RunStatus::kSucceeded, first, PlanSpec{16, 2, {1}, Precision::kBf16},
                  {At(0, "run_started", store::Severity::kInfo, "started",
                      {{"plan_source", "replan-smaller-budget"}}),
                   At(0, "plan", store::Severity::kInfo, "planner plan",
                      {{"source", "planner"}, {"planner", planner}}),
                   At(0, "ledger", store::Severity::kInfo, "ledger", ledger),
                   At(0, "profile", store::Severity::kInfo, "profile", Profile()),
                   At(0, "gate_passed", store::Severity::kInfo, "gate", gate)},
                  metrics, evals);
    Result<std::int64_t> release = store_->RecordRelease(
        {0, second_, "releases/run-2", std::string(64, 'a'), true, gate.dump(), 61, false});
    ASSERT_TRUE(release.ok());
    ASSERT_TRUE(store_->SetCurrentRelease(*release, 61).ok());
    Run(store::RunStatus::kSucceeded, std::nullopt, naive, {});
  }

  // A stored op profile (update_profile.h): matrix products at 9.14 FLOP/byte.
  static Json Profile() {
    return {{"updates", 3},
            {"update_seconds", 0.12},
            {"peak_flops", 1e11},
            {"memory_bandwidth_bytes_per_second", 1e10},
            {"ridge_intensity", 10.0},
            {"precision", "bf16"},
            {"outside_ops_seconds", 0.01},
            {"groups",
             {{{"group", "matrix products"},
               {"self_seconds", 0.06},
               {"share", 0.5},
               {"calls", 40},
               {"intensity", 9.142857},
               {"achieved_flops", 5.2e10},
               {"achieved_bytes_per_second", 5.7e9},
               {"fraction_of_bound", 0.57},
               {"bound", "memory"}},
              {{"group", "dropout"},
               {"self_seconds", 0.02},
               {"share", 0.17},
               {"calls", 8},
               {"intensity", 0},
               {"achieved_flops", 0},
               {"achieved_bytes_per_second", 2e9},
               {"fraction_of_bound", 0.2},
               {"bound", "memory"}}}},
            {"top_ops",
             {{{"name", "aten::mm"},
               {"group", "matrix products"},
               {"calls", 30},
               {"self_seconds", 0.05},
               {"share", 0.42}}}},
            {"trace_path", "profiles/run-2.trace.json"}};
  }

  testing::TempDir dir_;
  std::unique_ptr<store::Store> store_;
  std::int64_t second_ = 0;
};

std::vector<std::int64_t> NightIds(const Json& facts) {
  std::vector<std::int64_t> ids;
  for (const Json& r : facts["night"]) ids.push_back(r["id"].get<std::int64_t>());
  return ids;
}

// The segments of the stacked bar inside <div id="`id`">, by data-name.
std::map<std::string, std::int64_t> BarSegments(const std::string& html, const std::string& id) {
  const std::size_t start = html.find("<div id=\"" + id + "\">");
  const std::size_t end = html.find("</div>", start);
  EXPECT_NE(start, std::string::npos) << id;
  const std::string bar = html.substr(start, end - start);
  std::map<std::string, std::int64_t> segments;
  const std::regex segment(
      R"re(class="segment[^"]*" data-name="([a-z_]+)" data-bytes="(-?\d+)")re");
  for (auto it = std::sregex_iterator(bar.begin(), bar.end(), segment);
       it != std::sregex_iterator(); ++it) {
    segments[(*it)[1]] += std::stoll((*it)[2]);
  }
  return segments;
}

TEST_F(RunReportTest, TheNightsChainTheCurvesAndTheReleaseAreGathered) {
  RecordTwoNights();
  Result<Json> facts = GatherRunReport(*store_, second_, 100);
  ASSERT_TRUE(facts.ok()) << facts.status().message();
  EXPECT_EQ(NightIds(*facts), (std::vector<std::int64_t>{1, 2}));
  EXPECT_EQ((*facts)["night"][0]["cause"], "the worker ran out of memory");
  EXPECT_EQ((*facts)["night"][0]["status"], "oom");
  EXPECT_EQ((*facts)["night"][1]["plan_source"], "replan-smaller-budget");
  EXPECT_EQ((*facts)["night"][1]["config_hash"], "cfg");
  // 1200 updates drawn as at most 500, evenly, the last one kept.
  EXPECT_EQ((*facts)["updates_recorded"], 1200);
  ASSERT_LE((*facts)["updates"].size(), kMaxReportUpdates);
  EXPECT_GE((*facts)["updates"].size(), kMaxReportUpdates / 2);
  EXPECT_EQ((*facts)["updates"].back()["update"], 1200);
  EXPECT_EQ((*facts)["updates"].front()["update"], 1);
  EXPECT_EQ((*facts)["slice_evals"].size(), 6u);
  EXPECT_EQ((*facts)["release"]["run_id"], second_);
  EXPECT_TRUE((*facts)["release"]["current"].get<bool>());

  // The failed first run's report shows the same night, and no release of its own.
  Result<Json> first = GatherRunReport(*store_, 1, 100);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(NightIds(*first), (std::vector<std::int64_t>{1, 2}));
  EXPECT_TRUE((*first)["release"].is_null());
  // Night two is a night of its own.
  EXPECT_EQ(NightIds(*GatherRunReport(*store_, 3, 100)), (std::vector<std::int64_t>{3}));
  EXPECT_EQ(GatherRunReport(*store_, 99, 100).status().code(), Status::Code::kNotFound);
}

TEST_F(RunReportTest, ThePageShowsEverySectionAndItsLedgerBarAddsUpToTheRecordedCategories) {
  RecordTwoNights();
  const std::string html = RenderReportPage(*GatherRunReport(*store_, second_, 100));
  for (const char* section : {"plan", "memory", "profile", "curves", "throughput", "night", "gate",
                              "outcomes", "provenance"}) {
    EXPECT_NE(html.find("<section id=\"" + std::string(section) + "\">"), std::string::npos)
        << section;
  }
  // The ledger bar: each category as recorded, then what is free of the usable budget, then
  // the reserve; together the budget.
  const std::map<std::string, std::int64_t> bar = BarSegments(html, "ledger-bar");
  std::int64_t categories = 0;
  for (const auto& [name, bytes] : store::NamedCategories(Memory())) {
    if (name == "peak") continue;
    EXPECT_EQ(bar.at(std::string(name)), bytes) << name;
    categories += bytes;
  }
  EXPECT_EQ(bar.at("free"), kUsable - categories);
  EXPECT_EQ(bar.at("reserve"), kBudget - kUsable);
  std::int64_t drawn = 0;
  for (const auto& [name, bytes] : bar) drawn += bytes;
  EXPECT_EQ(drawn, kBudget);
  // Block 1 is checkpointed: it keeps its input and recomputes the rest; block 0 keeps all.
  const std::size_t blocks = html.find("<table id=\"blocks\">");
  ASSERT_NE(blocks, std::string::npos);
  EXPECT_NE(html.find("data-name=\"kept\" data-bytes=\"9000000\"", blocks), std::string::npos);
  EXPECT_NE(html.find("data-name=\"kept\" data-bytes=\"500000\"", blocks), std::string::npos);
  EXPECT_NE(html.find("data-name=\"recomputed\" data-bytes=\"8500000\"", blocks),
            std::string::npos);
  // The plan card compares like with like: the rejected candidate, never timed, by the time
  // model against the time model's 150 s for the chosen plan (not its measured 120 s, which
  // would make it look slower); and the time model's error on the chosen plan.
  EXPECT_NE(html.find("time model 2m 20s against 2m 30s for the chosen plan"), std::string::npos);
  EXPECT_NE(html.find("the time model predicted 2m 30s (+25%)"), std::string::npos);
  // Which category each of the plan's levers attacked.
  EXPECT_NE(html.find("<p>levers: 2 microbatches (activations), 1 block checkpointed "
                      "(activations), bf16 (activations)</p>"),
            std::string::npos);
  EXPECT_NE(html.find("<b>+25%</b>"), std::string::npos);
  // The rejected candidate and its reason, escaped: the page runs nothing and loads nothing.
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find(" src="), std::string::npos);
  EXPECT_EQ(html.find("href=\"http"), std::string::npos);
  EXPECT_LT(html.size(), 300u * 1024);
  // One line per series; the slices are named in the evaluation chart.
  EXPECT_NE(html.find("data-name=\"GPL-3\""), std::string::npos);
  // The gate's slice: its loss with its 95% interval, and a pass within the noise.
  EXPECT_NE(html.find("<td>2.8000 &plusmn; 0.0980</td>"), std::string::npos);
  EXPECT_NE(html.find("pass (within noise)"), std::string::npos);
  EXPECT_NE(html.find("data-name=\"Apache-2.0\""), std::string::npos);
  EXPECT_NE(html.find("data-name=\"live_bytes\""), std::string::npos);
  // The op profile: its groups in a table, the counted one on the roofline, the top ops.
  EXPECT_NE(html.find("<table id=\"op-groups\">"), std::string::npos);
  EXPECT_NE(html.find("<circle class=\"dot\" data-name=\"matrix products\""), std::string::npos);
  EXPECT_EQ(html.find("<circle class=\"dot\" data-name=\"dropout\""), std::string::npos);
  EXPECT_NE(html.find("<code>aten::mm</code>"), std::string::npos);
}

// The release side by side with what happened to it: when it went live, its outcomes by
// slice and metric with their counts, and its withdrawal.
TEST_F(RunReportTest, TheReleasesOutcomesAndWithdrawalAreOnItsRunsPage) {
  RecordTwoNights();
  const std::int64_t release = (*store_->CurrentRelease())->id;
  std::string html = RenderReportPage(*GatherRunReport(*store_, second_, 100));
  EXPECT_NE(html.find("Live since 1970-01-01T00:01:01Z; current."), std::string::npos) << html;
  EXPECT_NE(html.find("No outcomes reported"), std::string::npos);
  ASSERT_TRUE(store_
                  ->RecordOutcomes({{release, "en", "ctr", 70, 0.125, 400},
                                    {release, "en", "ctr", 80, 0.375, 100}})
                  .ok());
  Result<Json> facts = GatherRunReport(*store_, second_, 100);
  ASSERT_TRUE(facts.ok());
  ASSERT_EQ((*facts)["outcomes"].size(), 1u);
  EXPECT_EQ((*facts)["outcomes"][0]["count"], 500);
  EXPECT_TRUE((*facts)["previous_outcomes"].empty()) << "the first release replaced none";
  html = RenderReportPage(*facts);
  EXPECT_NE(html.find("<tr><td>en</td><td>ctr</td><td>0.175</td><td>500</td><td>-</td>"),
            std::string::npos)
      << html;

  // Withdrawn in favour of a later release, as the outcome watch does.
  Result<std::int64_t> other =
      store_->RecordRelease({0, 3, "releases/run-3", std::string(64, 'b'), true, "{}", 90, false});
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE(store_->SetCurrentRelease(*other, 90).ok());
  ASSERT_TRUE(store_->SetCurrentRelease(release, 95).ok());
  ASSERT_TRUE(
      store_->WithdrawRelease(release, *other, R"({"at": 99, "rolled_back_to": 2})", 99).ok());
  html = RenderReportPage(*GatherRunReport(*store_, second_, 100));
  EXPECT_NE(html.find("; not current; <span class=\"fail\">withdrawn</span> at "
                      "1970-01-01T00:01:39Z after its outcomes regressed, release 2 current again"),
            std::string::npos)
      << html;
  // The first run released nothing: no such section.
  EXPECT_EQ(RenderReportPage(*GatherRunReport(*store_, 1, 100)).find("id=\"outcomes\""),
            std::string::npos);
}

TEST_F(RunReportTest, ARunStoppedBeforeItsLedgerSaysSoInsteadOfDrawingNumbers) {
  store::RunRecord run;
  run.config_hash = "cfg";
  run.created_at = 5;
  run.deadline_at = 9999;
  Result<std::int64_t> id = store_->CreateRun(run);
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(store_->MarkUnfinishedAsInterrupted(7).ok());
  const std::string html = RenderReportPage(*GatherRunReport(*store_, *id, 100));
  EXPECT_NE(html.find("none chosen"), std::string::npos);
  EXPECT_NE(html.find("No ledger was measured"), std::string::npos);
  EXPECT_NE(html.find("The gate did not run"), std::string::npos);
  EXPECT_NE(html.find("released no model"), std::string::npos);
  EXPECT_EQ(html.find("ledger-bar"), std::string::npos);
}

}  // namespace
}  // namespace trainerd::daemon
