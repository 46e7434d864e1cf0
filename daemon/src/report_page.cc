#include "trainerd/daemon/report_page.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <vector>

#include "trainerd/daemon/duration_forecast.h"
#include "trainerd/daemon/json_text.h"
#include "trainerd/daemon/svg_chart.h"
#include "trainerd/trainer/spec/plan_text.h"
#include "trainerd/trainer/spec/units.h"
#include "trainerd/trainer/spec/worker_protocol.h"

namespace trainerd::daemon {

namespace {

using Json = nlohmann::json;

constexpr const char* kCategories[] = {"parameters",  "gradients",   "optimizer_state",
                                       "activations", "temporaries", "inputs"};

constexpr const char* kStyle = R"(
body { font: 14px/1.45 system-ui, sans-serif; color: #1d1d1f; max-width: 980px; margin: 24px auto;
  padding: 0 16px; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 28px 0 8px;
  border-bottom: 1px solid #ddd; padding-bottom: 4px; }
.muted, .axes text { color: #666; fill: #666; font-size: 11px; }
.axes line { stroke: #999; } .axes .grid { stroke: #eee; }
table { border-collapse: collapse; margin: 6px 0; } td, th { padding: 3px 10px 3px 0;
  text-align: left; vertical-align: top; } th { font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.status-succeeded, .pass { color: #1a7f37; } .status-failed, .fail, .status-oom,
.status-crashed, .status-leak, .status-rejected, .status-regressed, .status-deadline { color: #cf222e; }
.card { display: grid; grid-template-columns: repeat(4, 1fr); gap: 8px; margin: 8px 0; }
.card div { background: #f6f8fa; border-radius: 6px; padding: 8px; }
.card b { display: block; font-size: 18px; }
figure { margin: 10px 0; } figcaption { font-weight: 600; font-size: 13px; }
.charts { display: grid; grid-template-columns: 1fr; }
ul.legend { list-style: none; padding: 0; margin: 4px 0 12px; display: flex; flex-wrap: wrap;
  gap: 4px 14px; font-size: 12px; }
.swatch { display: inline-block; width: 11px; height: 11px; margin-right: 4px;
  vertical-align: -1px; border: 1px solid #0003; }
.seg-parameters { fill: #4269d0; background: #4269d0; }
.seg-gradients { fill: #97bbf5; background: #97bbf5; }
.seg-optimizer_state { fill: #a463f2; background: #a463f2; }
.seg-activations { fill: #ff725c; background: #ff725c; }
.seg-temporaries { fill: #efb118; background: #efb118; }
.seg-inputs { fill: #3ca951; background: #3ca951; }
.seg-free { fill: #f2f2f2; background: #f2f2f2; }
.seg-reserve { fill: #bbb; background: #bbb; }
.seg-kept { fill: #ff725c; background: #ff725c; }
.seg-recomputed { fill: #ffd3cc; background: #ffd3cc; }
.hatched { stroke: #0005; stroke-dasharray: 3 2; }
.bar .frame { stroke: #999; }
code { font-size: 12px; word-break: break-all; }
)";

std::string Text(const Json& value, const std::string& none = "-") {
  if (value.is_string()) return EscapeHtml(value.get<std::string>());
  if (value.is_null()) return none;
  return EscapeHtml(value.dump());
}

// A fraction (0.25) as a percentage ("25.0%"), "-" when absent.
// "Corrected: 1m 05s, x1.12 by the last 3 nights on this hardware (x0.95 to x1.30)" from a
// planner's plan event; "" where it had no nights to correct by (or was stored before them).
std::string CorrectedDurationText(const Json& plan_event) {
  if (!plan_event.is_object()) return "";
  const Json c = plan_event.value("duration_correction", Json());
  const Json duration = plan_event.value("corrected_duration_seconds", Json());
  const DurationCorrection correction = DurationCorrection::FromJson(c.dump());
  if (!duration.is_number() || correction.nights == 0) return "";
  return "Corrected: " + FormatDuration(duration.get<double>()) + ", " + correction.Describe();
}

std::string PercentText(const Json& fraction) {
  return fraction.is_number() ? NumberText(100 * fraction.get<double>(), "%.1f%%") : "-";
}

// "2.3412 +- 0.0213": a loss and its 95% interval from its standard error; the loss alone
// without one.
std::string Interval(const Json& loss, const Json& standard_error) {
  if (!loss.is_number() || !standard_error.is_number()) return NumberText(loss, "%.4f");
  return NumberText(loss, "%.4f") + " &plusmn; " +
         NumberText(1.96 * standard_error.get<double>(), "%.4f");
}

std::string BytesTick(double bytes) { return FormatBytes(static_cast<std::int64_t>(bytes)); }

std::string StoredPlanText(const Json& plan) {
  if (!plan.is_object()) return "none chosen";
  const Json blocks = plan.value("checkpoint_blocks", Json::array());
  return std::to_string(plan.value("microbatch", 0)) + " x " +
         std::to_string(plan.value("accumulation_steps", 0)) + ", " + plan.value("precision", "") +
         ", " +
         (blocks.empty() ? std::string("no blocks checkpointed")
                         : "blocks " + blocks.dump() + " checkpointed") +
         (plan.value("optimizer_state", "device") == "host" ? ", optimizer state on the host"
                                                            : "") +
         (plan.value("zero_stage", 0) > 0
              ? ", ZeRO stage " + std::to_string(plan.value("zero_stage", 0))
              : "");
}

// The details of the run's last event of `kind`, or null.
Json LastEventDetails(const Json& facts, const std::string& kind) {
  Json found;
  for (const Json& e : facts["events"]) {
    if (e.value("kind", "") == kind) found = e["details"];
  }
  return found;
}

std::string Cell(const std::string& label, const std::string& value) {
  return "<div>" + EscapeHtml(label) + "<b>" + value + "</b></div>";
}

std::string Row(const std::vector<std::string>& cells, const char* tag = "td") {
  std::string row = "<tr>";
  for (const std::string& c : cells) row += std::string("<") + tag + ">" + c + "</" + tag + ">";
  return row + "</tr>\n";
}

// The worker's report stored as an event's details (trainer/spec/worker_protocol.h), when the
// run recorded one.
template <typename Report>
std::optional<Report> StoredReport(const Json& details) {
  if (!details.is_object()) return std::nullopt;
  return Parse<Report>(details);
}

std::string PlanSection(const Json& facts) {
  const Json& run = facts["run"];
  const Json plan_event = LastEventDetails(facts, "plan");
  const std::optional<ChosenPlan> planner =
      plan_event.is_object() ? StoredReport<ChosenPlan>(plan_event.value("planner", Json()))
                             : std::nullopt;
  const std::optional<MemoryLedger> ledger =
      StoredReport<MemoryLedger>(LastEventDetails(facts, "ledger"));
  std::string source = plan_event.is_object() ? plan_event.value("source", "") : "";
  std::string html = "<section id=\"plan\"><h2>Plan</h2>\n<p><b>" +
                     EscapeHtml(StoredPlanText(run["plan"])) + "</b>" +
                     (source.empty() ? "" : ", from the " + EscapeHtml(source)) + "</p>\n";
  if (const std::optional<PlanSpec> levers = StoredReport<PlanSpec>(run["plan"])) {
    html += "<p>levers: " + EscapeHtml(DescribeLevers(*levers)) + "</p>\n";
  }
  // Update time: the effective batch at the measured samples/s.
  Json measured_update;
  const Json effective =
      run["shapes"].is_object() ? run["shapes"].value("effective_batch", Json()) : Json();
  if (effective.is_number() && run["samples_per_second"].is_number() &&
      run["samples_per_second"].get<double>() > 0) {
    measured_update = effective.get<double>() / run["samples_per_second"].get<double>();
  }
  const Json peak =
      run["peak_memory_bytes"].is_object() ? run["peak_memory_bytes"]["peak"] : Json();
  html +=
      "<div class=\"card\">" +
      Cell("predicted peak", planner ? BytesText(planner->predicted_peak_bytes) : "-") +
      Cell("measured peak", BytesText(peak)) +
      Cell("time model's update", planner && planner->predicted_update_seconds > 0
                                      ? NumberText(planner->predicted_update_seconds, "%.3g s")
                                      : "-") +
      Cell("planner's timed update",
           planner ? NumberText(planner->measured_update_seconds, "%.3g s") : "-") +
      Cell("time model error", planner && planner->predicted_update_seconds > 0
                                   ? NumberText(planner->TimeModelError() * 100, "%+.0f%%")
                                   : "-") +
      Cell("training's update", NumberText(measured_update, "%.3g s")) +
      Cell("planner's error",
           planner && measured_update.is_number()
               ? NumberText(
                     (planner->measured_update_seconds / measured_update.get<double>() - 1) * 100,
                     "%+.0f%%")
               : "-") +
      "</div>\n";
  if (ledger && ledger->usable_bytes > 0) {
    const double share =
        static_cast<double>(ledger->peak_bytes) / static_cast<double>(ledger->usable_bytes);
    html += "<p>It fits: the ledger measured a peak of " + BytesText(ledger->peak_bytes) + ", " +
            PercentText(share) + " of the " + BytesText(ledger->usable_bytes) + " usable (budget " +
            BytesText(ledger->budget_bytes) + " less the reserve).</p>\n";
  }
  if (planner) {
    html += "<p>The planner's probes took " + NumberText(planner->probe_seconds, "%.1f s") +
            "; the job takes " + EscapeHtml(DescribeChosenTiming(*planner)) +
            (planner->window_seconds
                 ? ", in a " + NumberText(*planner->window_seconds, "%.0f s") + " window"
                 : std::string()) +
            ".</p>\n";
    if (const std::string corrected = CorrectedDurationText(plan_event); !corrected.empty()) {
      html += "<p id=\"duration-correction\">" + EscapeHtml(corrected) + ".</p>\n";
    }
    if (const std::string counting = DescribeMemoryCounting(*planner); !counting.empty()) {
      html += "<p id=\"memory-counting\">Memory: " + EscapeHtml(counting) + ".</p>\n";
    }
    if (!planner->rejected.empty()) {
      html += "<table id=\"rejected\">" +
              Row({"faster candidate rejected", "predicted peak", "faster by", "why"}, "th");
      for (const RejectedPlan& r : planner->rejected) {
        html += Row({EscapeHtml(StoredPlanText(ToJson(r.plan))), BytesText(r.predicted_peak_bytes),
                     EscapeHtml(DescribeRejectedTiming(r, *planner)), EscapeHtml(r.reason)});
      }
      html += "</table>\n";
    } else {
      html += "<p class=\"muted\">No faster candidate was rejected.</p>\n";
    }
  }
  for (const Json& e : facts["events"]) {
    if (e.value("kind", "") == "parity" || e.value("kind", "") == "parity_disabled") {
      html += "<p>Parity: " + Text(e["message"]) + "</p>\n";
    }
  }
  return html + "</section>\n";
}

std::string MemorySection(const Json& facts) {
  const Json& run = facts["run"];
  const std::optional<MemoryLedger> ledger =
      StoredReport<MemoryLedger>(LastEventDetails(facts, "ledger"));
  std::string html = "<section id=\"memory\"><h2>Memory</h2>\n";
  std::vector<BarSegment> segments;
  std::int64_t peak = 0;
  if (run["peak_memory_bytes"].is_object()) {
    const Json& categories = run["peak_memory_bytes"];
    for (const char* c : kCategories)
      segments.push_back({c, categories.value(c, std::int64_t{0}), false});
    peak = categories.value("peak", std::int64_t{0});
  } else if (ledger) {
    // The store's categories: the output layer counts in the activations.
    const std::int64_t bytes[] = {
        ledger->parameters_bytes,      ledger->gradients_bytes,
        ledger->optimizer_state_bytes, ledger->activations_bytes + ledger->output_layer_bytes,
        ledger->temporaries_bytes,     ledger->inputs_bytes};
    for (std::size_t i = 0; i < std::size(kCategories); ++i) {
      segments.push_back({kCategories[i], bytes[i], false});
    }
    peak = ledger->peak_bytes;
  } else {
    return html + "<p class=\"muted\">No ledger was measured for this run.</p></section>\n";
  }
  std::int64_t sum = 0;
  for (const BarSegment& segment : segments) sum += segment.bytes;
  const std::int64_t budget = ledger ? ledger->budget_bytes : 0;
  const std::int64_t usable = ledger ? ledger->usable_bytes : 0;
  std::vector<BarSegment> against_budget = segments;
  if (usable > sum) against_budget.push_back({"free", usable - sum, false});
  if (budget > usable) against_budget.push_back({"reserve", budget - usable, true});
  html += "<p>At the measured peak, by category, against the budget of " +
          (budget > 0 ? FormatBytes(budget) : std::string("-")) + " (usable " +
          (usable > 0 ? FormatBytes(usable) : std::string("-")) +
          ", the rest is the reserve):</p>\n" + "<div id=\"ledger-bar\">" +
          RenderStackedBar(against_budget, budget) + "</div>\n" +
          "<p>The same categories at their own scale (together " + FormatBytes(sum) +
          "; the measured peak was " + FormatBytes(peak) + "):</p>\n<div id=\"ledger-zoom\">" +
          RenderStackedBar(segments, sum) + "</div>\n";
  if (ledger && !ledger->blocks.empty()) {
    std::set<std::int64_t> checkpointed;
    if (run["plan"].is_object()) {
      for (const Json& b : run["plan"]["checkpoint_blocks"])
        checkpointed.insert(b.get<std::int64_t>());
    }
    std::int64_t widest = 1;
    for (const BlockActivation& b : ledger->blocks) widest = std::max(widest, b.activation_bytes);
    html +=
        "<p>Activation bytes each block saves for backward: a checkpointed block keeps its "
        "input and recomputes the rest.</p>\n<table id=\"blocks\">" +
        Row({"block", "saved for backward", ""}, "th");
    for (const BlockActivation& b : ledger->blocks) {
      const bool ckpt = checkpointed.count(b.index) > 0;
      const std::int64_t kept = ckpt ? b.checkpointed_activation_bytes : b.activation_bytes;
      html += Row({std::to_string(b.index) + (ckpt ? " (checkpointed)" : ""), FormatBytes(kept),
                   RenderStackedBar(
                       {{"kept", kept, false}, {"recomputed", b.activation_bytes - kept, true}},
                       widest, /*legend=*/false)});
    }
    html +=
        "</table>\n<ul class=\"legend\"><li><span class=\"swatch seg-kept\"></span>kept "
        "for backward</li><li><span class=\"swatch seg-recomputed hatched\"></span>"
        "recomputed in backward</li></ul>\n";
  }
  return html + "</section>\n";
}

std::string ProfileSection(const Json& facts) {
  const std::optional<ProfileReport> p =
      StoredReport<ProfileReport>(LastEventDetails(facts, "profile"));
  std::string html = "<section id=\"profile\"><h2>Where an update spends its time</h2>\n";
  if (!p) {
    return html +
           "<p class=\"muted\">No op profile: the first run of a new plan on the CPU is "
           "profiled, and this one's plan had been validated before, ran on a GPU, or "
           "stopped before training.</p></section>\n";
  }
  html += "<p>" + std::to_string(p->updates) + " updates after a warm-up, " +
          NumberText(p->update_seconds, "%.4g s") + " each under the profiler (" +
          NumberText(p->unprofiled_update_seconds, "%.4g s") +
          " without it: the shares are of the profiled update); measured roofs: peak " +
          NumberText(p->peak_flops, "%.3g FLOP/s") + " (" + EscapeHtml(p->precision) +
          " matrix products), memory bandwidth " +
          NumberText(p->memory_bandwidth_bytes_per_second, "%.3g B/s") + ", ridge at " +
          NumberText(p->ridge_intensity, "%.3g FLOP/byte") + ".</p>\n<table id=\"op-groups\">" +
          Row({"op group", "self time", "share", "calls", "FLOP/byte", "achieved", "of its bound",
               "bound"},
              "th");
  std::vector<RooflineDot> dots;
  for (const ProfileReport::Group& g : p->groups) {
    html += Row({EscapeHtml(g.group), NumberText(g.self_seconds, "%.3g s"), PercentText(g.share),
                 NumberText(g.calls, "%.0f"), NumberText(g.intensity, "%.3g"),
                 g.achieved_flops > 0 ? NumberText(g.achieved_flops, "%.3g FLOP/s")
                                      : NumberText(g.achieved_bytes_per_second, "%.3g B/s"),
                 PercentText(g.fraction_of_bound), EscapeHtml(g.bound)});
    dots.push_back({g.group, g.intensity, g.achieved_flops});
  }
  html += Row({"outside ops", NumberText(p->outside_ops_seconds, "%.3g s")}) + "</table>\n";
  html +=
      "<figure class=\"chart\"><figcaption>Roofline: op groups whose FLOPs are counted "
      "(matrix products)</figcaption>\n" +
      RenderRoofline(p->peak_flops, p->memory_bandwidth_bytes_per_second, dots) +
      "</figure>\n<table id=\"top-ops\">" +
      Row({"op", "group", "calls", "self time", "share"}, "th");
  for (const ProfileReport::Op& op : p->top_ops) {
    html += Row({"<code>" + EscapeHtml(op.name) + "</code>", EscapeHtml(op.group),
                 NumberText(op.calls, "%.0f"), NumberText(op.self_seconds, "%.3g s"),
                 PercentText(op.share)});
  }
  html += "</table>\n";
  if (p->trace_path) {
    html += "<p>Chrome trace (Perfetto opens it): <code>" + EscapeHtml(*p->trace_path) +
            "</code></p>\n";
  }
  return html + "</section>\n";
}

std::string CurvesSection(const Json& facts) {
  const Json& updates = facts["updates"];
  auto series = [&](const std::string& key) {
    ChartSeries s{key, {}};
    for (const Json& u : updates) {
      s.points.emplace_back(u["update"].get<double>(),
                            u[key].is_number() ? u[key].get<double>() : NAN);
    }
    return s;
  };
  std::map<std::string, ChartSeries> slices;
  for (const Json& e : facts["slice_evals"]) {
    ChartSeries& s = slices[e["slice"].get<std::string>()];
    s.name = e["slice"].get<std::string>();
    s.points.emplace_back(e["update"].get<double>(),
                          e["loss"].is_number() ? e["loss"].get<double>() : NAN);
  }
  std::vector<ChartSeries> eval_series;
  for (auto& [name, s] : slices) eval_series.push_back(std::move(s));
  std::string html = "<section id=\"curves\"><h2>Over the run</h2>\n<p class=\"muted\">" +
                     std::to_string(updates.size()) + " of " + Text(facts["updates_recorded"]) +
                     " updates drawn.</p>\n<div class=\"charts\">";
  html += RenderLineChart({"Live bytes after each update (growth is a leak)",
                           "update",
                           "bytes",
                           BytesTick,
                           {series("live_bytes")}});
  html += RenderLineChart({"Training loss", "update", "loss", nullptr, {series("loss")}});
  html +=
      RenderLineChart({"Evaluation loss per data slice", "update", "loss", nullptr, eval_series});
  html += RenderLineChart(
      {"Samples per second", "update", "samples/s", nullptr, {series("samples_per_second")}});
  for (const Json& e : facts["events"]) {
    if (e.value("kind", "").find("leak") != std::string::npos) {
      html += "<p class=\"fail\">" + Text(e["message"]) + "</p>\n";
    }
  }
  return html + "</div></section>\n";
}

std::string ThroughputSection(const Json& run) {
  return "<section id=\"throughput\"><h2>Throughput and cost</h2>\n<div class=\"card\">" +
         Cell("samples/s", NumberText(run["samples_per_second"], "%.1f")) +
         (run.value("world_size", 1) > 1
              ? Cell("ranks", std::to_string(run["world_size"].get<int>())) +
                    Cell("samples/s per rank",
                         NumberText(run["samples_per_second_per_rank"], "%.1f"))
              : "") +
         Cell("tokens/s", NumberText(run["tokens_per_second"], "%.0f")) +
         Cell("MFU", NumberText(run["mfu"], "%.3f")) +
         Cell("cost per sample", NumberText(run["cost_per_sample"], "%.3g")) +
         "</div>\n<p>Method: " + Text(run["throughput_method"]) +
         ". Parity check before training: " + NumberText(run["parity_seconds"], "%.1f s") +
         ".</p></section>\n";
}

std::string NightSection(const Json& facts) {
  std::string html = "<section id=\"night\"><h2>The night</h2>\n<table>" +
                     Row({"run", "status", "config", "plan", "from", "what ended it"}, "th");
  const std::int64_t self = facts["run"]["id"].get<std::int64_t>();
  for (const Json& r : facts["night"]) {
    const std::int64_t id = r["id"].get<std::int64_t>();
    const std::string status = r["status"].get<std::string>();
    html +=
        Row({id == self
                 ? "<b>" + std::to_string(id) + "</b>"
                 : "<a href=\"run-" + std::to_string(id) + ".html\">" + std::to_string(id) + "</a>",
             "<span class=\"status-" + EscapeHtml(status) + "\">" + EscapeHtml(status) + "</span>",
             "<code>" + Text(r["config_hash"]).substr(0, 12) + "</code>",
             EscapeHtml(StoredPlanText(r["plan"])), Text(r["plan_source"]), Text(r["cause"], "")});
  }
  html += "</table>\n";
  const Json& release = facts["release"];
  if (release.is_object()) {
    html += std::string("<p>Release ") + Text(release["id"]) + ": model <code>" +
            Text(release["artifact_sha256"]) + "</code>, " +
            (release.value("current", false) ? "current" : "not current") + ", gate " +
            (release.value("gate_passed", false) ? "passed" : "failed") + ".</p>\n";
  } else {
    html += "<p>This run released no model.</p>\n";
  }
  return html + "</section>\n";
}

// The input-quality check of the night's data (docs/data-quality.md), against the current
// release's data.
std::string InputSection(const Json& run) {
  const Json q = run.value("data_quality", Json());
  std::string html = "<section id=\"input\"><h2>Input quality</h2>\n";
  if (!q.is_object()) {
    return html + "<p class=\"muted\">No input-quality check ran for this run.</p></section>\n";
  }
  const bool pass = q.value("pass", false);
  html += std::string("<p class=\"") +
          (pass ? "pass\">The data passed" : "fail\">The data failed") + " its quality check" +
          (q.value("reference_run_id", Json()).is_number()
               ? " against the current release's data (run " +
                     Text(q.value("reference_run_id", Json())) + ")"
               : std::string(" alone: there was no release's data to compare with")) +
          ".</p>\n<table>" + Row({"training samples", Text(q.value("train_samples", Json()))}) +
          Row({"size against the release's", NumberText(q.value("size_ratio", Json()), "%.3f")}) +
          Row({"ids moved (Jensen-Shannon, bits)",
               NumberText(q.value("id_divergence", Json()), "%.4f")}) +
          Row({"largest input column shift (spreads)",
               NumberText(q.value("column_shift", Json()), "%.3g")}) +
          Row({"ids beyond the vocabulary of " + Text(q.value("vocabulary", Json())),
               PercentText(q.value("beyond_vocabulary", Json()))}) +
          Row({"rows with NaN or Inf", PercentText(q.value("not_finite_rows", Json()))}) +
          Row({"targets the loss masks learn", PercentText(q.value("learned_share", Json()))}) +
          Row({"learned share's difference from the release's data",
               PercentText(q.value("learned_share_shift", Json()))}) +
          "</table>\n";
  for (const Json& breach : q.value("breaches", Json::array())) {
    html += "<p class=\"fail\">" + Text(breach) + "</p>\n";
  }
  return html + "</section>\n";
}

std::string GateSection(const Json& facts) {
  Json gate = LastEventDetails(facts, "gate_passed");
  if (!gate.is_object()) gate = LastEventDetails(facts, "gate_failed");
  std::string html = "<section id=\"gate\"><h2>Release gate</h2>\n";
  if (!gate.is_object()) {
    return html +
           "<p class=\"muted\">The gate did not run (the run did not finish).</p></section>\n";
  }
  html +=
      std::string("<p class=\"") + (gate.value("pass", false) ? "pass" : "fail") + "\">" +
      Text(gate["reason"]) + "</p>\n<table>" +
      Row({"slice", "eval loss (95% interval)", "reference (95% interval)", "tolerance",
           "simple baseline", "below the baseline by", "predictions moved (JSD, bits)", "verdict"},
          "th");
  for (const Json& s : gate.value("slices", Json::array())) {
    const bool pass = s.value("pass", false);
    // value(): a gate recorded before the baseline, the predictions and the windows has none.
    const Json loss = s.value("loss", Json());
    const Json baseline = s.value("baseline", Json());
    const Json margin = loss.is_number() && baseline.is_number()
                            ? Json(baseline.get<double>() - loss.get<double>())
                            : Json(nullptr);
    const std::string verdict = !pass                            ? "fail\">fail"
                                : s.value("within_noise", false) ? "pass\">pass (within noise)"
                                                                 : "pass\">pass";
    html +=
        Row({Text(s["slice"]), Interval(loss, s.value("standard_error", Json())),
             Interval(s["reference"], s.value("reference_standard_error", Json())),
             PercentText(s["tolerance"]), NumberText(baseline, "%.4f"), NumberText(margin, "%.4f"),
             NumberText(s.value("prediction_divergence", Json()), "%.4f"),
             "<span class=\"" + verdict + "</span>"});
  }
  return html + "</table></section>\n";
}

// What the run's release did once live: its state, and its outcomes beside the previous
// release's (docs/outcomes.md). None for a run that released no model.
std::string OutcomesSection(const Json& facts) {
  const Json& release = facts["release"];
  if (!release.is_object() || !release.value("gate_passed", false)) return "";
  std::string html = "<section id=\"outcomes\"><h2>After the release</h2>\n<p>";
  html += release["live_at"].is_number() ? "Live since " + TimeText(release["live_at"])
                                         : std::string("Never live");
  if (release["previous_release"].is_number()) {
    html += ", after release " + Text(release["previous_release"]);
  }
  html += release.value("current", false) ? "; current" : "; not current";
  if (release.value("pinned", false)) html += "; pinned";
  const Json& withdrawn = release["withdrawn"];
  if (withdrawn.is_object()) {
    html += "; <span class=\"fail\">withdrawn</span> at " + TimeText(withdrawn["at"]) +
            " after its outcomes regressed, release " + Text(withdrawn["rolled_back_to"]) +
            " current again";
  }
  if (release["files_removed_at"].is_number()) {
    html += "; its files were removed by the retention policy at " +
            TimeText(release["files_removed_at"]);
  }
  html += ".</p>\n";
  const Json outcomes = facts.value("outcomes", Json::array());
  if (outcomes.empty()) {
    return html + "<p class=\"muted\">No outcomes reported (trainerctl outcome).</p></section>\n";
  }
  html += "<table>" +
          Row({"slice", "metric", "value", "outcomes", "previous release", "outcomes"}, "th");
  for (const Json& o : outcomes) {
    std::vector<std::string> row = {Text(o["slice"]),
                                    Text(o["metric"]),
                                    NumberText(o["value"], "%.6g"),
                                    Text(o["count"]),
                                    "-",
                                    "-"};
    for (const Json& p : facts.value("previous_outcomes", Json::array())) {
      if (p["slice"] == o["slice"] && p["metric"] == o["metric"]) {
        row[4] = NumberText(p["value"], "%.6g");
        row[5] = Text(p["count"]);
      }
    }
    html += Row(row);
  }
  return html + "</table></section>\n";
}

std::string ProvenanceSection(const Json& run) {
  const Json& hw = run["hardware"];
  const Json& sw = run["software"];
  return "<section id=\"provenance\"><h2>Provenance</h2>\n<table>" +
         Row({"config version", "<code>" + Text(run["config_hash"]) + "</code>"}) +
         Row({"data fingerprint", "<code>" + Text(run["data_fingerprint"]) + "</code>"}) +
         Row({"seeds", "<code>" + Text(run["seeds"]) + "</code>"}) +
         Row({"shapes", "<code>" + Text(run["shapes"]) + "</code>"}) +
         Row({"hardware", Text(hw["cpu_model"]) +
                              (hw.value("isa", "").empty() ? "" : " (" + Text(hw["isa"]) + ")") +
                              ", " + Text(hw["cpu_cores"]) + " cores, " +
                              BytesText(hw["memory_bytes"]) + "; device " + Text(hw["device"]) +
                              " " + BytesText(hw["device_memory_bytes"])}) +
         Row({"software", "trainerd " + Text(sw["trainerd_version"]) + ", LibTorch " +
                              Text(sw["libtorch_version"]) + ", " + Text(sw["compiler"]) +
                              ", BLAS " + Text(sw["blas"])}) +
         "</table></section>\n";
}

}  // namespace

std::string RenderReportPage(const Json& facts) {
  const Json& run = facts["run"];
  const std::string id = Text(run["id"]);
  const std::string status = run["status"].get<std::string>();
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>trainerd run " +
         id + "</title>\n<style>" + kStyle + "</style></head>\n<body>\n<header><h1>Run " + id +
         ": <span class=\"status-" + EscapeHtml(status) + "\">" + EscapeHtml(status) +
         "</span></h1>\n<p class=\"muted\">config " + Text(run["config_hash"]).substr(0, 12) +
         ", started " + TimeText(run["started_at"]) + ", ended " + TimeText(run["ended_at"]) +
         ", deadline " + TimeText(run["deadline_at"]) + "</p></header>\n" + PlanSection(facts) +
         MemorySection(facts) + ProfileSection(facts) + CurvesSection(facts) +
         ThroughputSection(run) + NightSection(facts) + InputSection(run) + GateSection(facts) +
         OutcomesSection(facts) + ProvenanceSection(run) +
         "<footer class=\"muted\"><p>Written by trainerd at " + TimeText(facts["generated_at"]) +
         ".</p></footer>\n</body></html>\n";
}

}  // namespace trainerd::daemon
