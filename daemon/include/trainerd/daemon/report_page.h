// The run report as one self-contained HTML page: inline CSS and SVG, no script, nothing
// loaded from anywhere (docs/operations.md, "The run report"). Its sections, each a
// <section id=...>: "plan" (the plan card: where the plan came from, predicted against
// measured peak and update time, the candidates the planner rejected and why), "memory" (the
// ledger as a stacked bar against the usable budget and the reserve, per-block activation
// bytes kept or recomputed), "profile" (the op profile of a new plan: each op group's share of
// an update and its place on the machine's roofline, the top ops), "curves" (live bytes, loss,
// per-slice eval loss and samples/s per update), "throughput" (samples/s, MFU, cost per sample),
// "night" (the fallback chain and the release), "gate" (the release gate per slice) and
// "provenance" (hardware, software, seeds, data fingerprint, config version).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace trainerd::daemon {

// `facts` as GatherRunReport makes them (run_report.h). Missing facts (a run that stopped
// before its ledger, no release) are shown as such, never invented.
std::string RenderReportPage(const nlohmann::json& facts);

}  // namespace trainerd::daemon
