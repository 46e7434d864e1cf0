// The report of one run: the facts gathered from the run store, and the page made of them.
//
// The facts are one JSON object (`trainerctl report RUN --json`, stable field names, bytes and
// seconds): "run" (as `show` has it), "events", "slice_evals", "updates" (the per-update
// metrics, at most kMaxReportUpdates of them, evenly spaced, the last always kept),
// "updates_recorded", "night" (every run of the run's chain of fallbacks, oldest first, each
// with its config version, plan, where the plan came from and the error event that ended it),
// "release" (the run's release, or null), with the release "outcomes" and "previous_outcomes"
// (control_queries.h, AddOutcomesJson), and "generated_at". The page is
// RenderReportPage(facts) (report_page.h).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "trainerd/common/status.h"
#include "trainerd/store/store.h"

namespace trainerd::daemon {

inline constexpr std::size_t kMaxReportUpdates = 500;

// NotFound for an unknown run; the store's error otherwise.
Result<nlohmann::json> GatherRunReport(store::Store& store, std::int64_t run_id, double now);

// Gathers, renders and atomically writes the page of `run_id` to `path`.
Status WriteRunReport(store::Store& store, std::int64_t run_id, double now,
                      const std::string& path);

}  // namespace trainerd::daemon
