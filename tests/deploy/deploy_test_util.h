// Helpers shared by the deploy/ tests: repository paths, the metrics the daemon exports, a
// PromQL scanner that finds the metric names an expression selects, and a promtool runner.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace trainerd::deploy::testing {

// The metric names trainerd's exporter serves (DaemonMetrics::FamilyNames), plus
// `up`, which Prometheus adds to every scrape. Dashboards and alerts may select these and
// nothing else.
const std::set<std::string>& ExportedMetrics();

// `relative` inside the source tree named by $TRAINERD_SOURCE_DIR (set by ctest). Empty
// when the variable is unset; the caller fails the test.
std::string SourcePath(std::string_view relative);

// The whole file, or an empty string when it cannot be read.
std::string ReadFile(const std::string& path);

// The metric names that `expr` selects: identifiers that are not functions, aggregations,
// keywords, label names (inside {}, by (...), on (...)) or string contents. A scanner, not
// a parser: run promtool on the expression to know it is valid PromQL.
std::set<std::string> PromqlMetricNames(std::string_view expr);

// The promtool executable found by CMake, or an empty string with `error` set to a message
// that says how to install it.
std::string Promtool(std::string* error);

struct CommandResult {
  int exit_code = -1;  // -1 when the command did not run or was killed by a signal.
  std::string output;  // stdout, then stderr.
};

// Runs `argv` (argv[0] is a path) and waits for it.
CommandResult RunCommand(const std::vector<std::string>& argv);

}  // namespace trainerd::deploy::testing
