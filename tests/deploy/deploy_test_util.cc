#include "deploy_test_util.h"

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "../support/child_process.h"
#include "trainerd/daemon/daemon_metrics.h"

namespace trainerd::deploy::testing {
namespace {

bool IsIdentifierStart(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':';
}
bool IsIdentifierChar(char c) {
  return IsIdentifierStart(c) || std::isdigit(static_cast<unsigned char>(c));
}

// Index just past the string literal that starts at `i` (quote at expr[i]).
std::size_t SkipString(std::string_view expr, std::size_t i) {
  const char quote = expr[i++];
  while (i < expr.size() && expr[i] != quote) {
    // Raw `backtick` strings have no escapes.
    if (expr[i] == '\\' && quote != '`') ++i;
    ++i;
  }
  return i + 1;
}

// Index just past the bracket that closes the one at `i`, skipping string literals.
std::size_t SkipBracketed(std::string_view expr, std::size_t i) {
  const char open = expr[i];
  const char close = open == '{' ? '}' : open == '[' ? ']' : ')';
  int depth = 0;
  while (i < expr.size()) {
    const char c = expr[i];
    if (c == '"' || c == '\'' || c == '`') {
      i = SkipString(expr, i);
      continue;
    }
    if (c == open) ++depth;
    if (c == close && --depth == 0) return i + 1;
    ++i;
  }
  return i;
}

std::size_t SkipSpace(std::string_view expr, std::size_t i) {
  while (i < expr.size() && std::isspace(static_cast<unsigned char>(expr[i]))) ++i;
  return i;
}

// Words that are never metric names where they appear.
const std::set<std::string>& Keywords() {
  static const auto* const kKeywords = new std::set<std::string>{
      "and", "or", "unless", "bool", "offset", "inf", "nan", "atan2",
      // Aggregation operators may be followed by `by (...)` rather than `(`.
      "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk",
      "topk", "quantile"};
  return *kKeywords;
}

// Keywords followed by a parenthesized list of label names.
const std::set<std::string>& LabelListKeywords() {
  static const auto* const kLabelListKeywords =
      new std::set<std::string>{"by", "without", "on", "ignoring", "group_left", "group_right"};
  return *kLabelListKeywords;
}

}  // namespace

const std::set<std::string>& ExportedMetrics() {
  static const auto* const kMetrics = [] {
    const daemon::DaemonMetrics metrics("test");
    auto* names =
        new std::set<std::string>(metrics.FamilyNames().begin(), metrics.FamilyNames().end());
    names->insert("up");
    return names;
  }();
  return *kMetrics;
}

std::string SourcePath(std::string_view relative) {
  const char* root = std::getenv("TRAINERD_SOURCE_DIR");
  if (root == nullptr || *root == '\0') return "";
  return (std::filesystem::path(root) / relative).string();
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::set<std::string> PromqlMetricNames(std::string_view expr) {
  std::set<std::string> names;
  std::size_t i = 0;
  while (i < expr.size()) {
    const char c = expr[i];
    if (c == '"' || c == '\'' || c == '`') {
      i = SkipString(expr, i);
    } else if (c == '{' || c == '[') {
      // Label matchers; ranges and subqueries.
      i = SkipBracketed(expr, i);
    } else if (c == '#') {
      while (i < expr.size() && expr[i] != '\n') ++i;
    } else if (std::isdigit(static_cast<unsigned char>(c)) ||
               (c == '.' && i + 1 < expr.size() &&
                std::isdigit(static_cast<unsigned char>(expr[i + 1])))) {
      // Numbers and durations: 26, 3600, 1e3, 0x1f, 1h30m.
      while (i < expr.size() && (std::isalnum(static_cast<unsigned char>(expr[i])) ||
                                 expr[i] == '.' || expr[i] == '_'))
        ++i;
    } else if (IsIdentifierStart(c)) {
      const std::size_t start = i;
      while (i < expr.size() && IsIdentifierChar(expr[i])) ++i;
      const std::string word(expr.substr(start, i - start));
      const std::size_t next = SkipSpace(expr, i);
      const bool call = next < expr.size() && expr[next] == '(';
      if (LabelListKeywords().count(word) > 0) {
        if (call) i = SkipBracketed(expr, next);
      } else if (!call && Keywords().count(word) == 0) {
        names.insert(word);
      }
    } else {
      ++i;
    }
  }
  return names;
}

std::string Promtool(std::string* error) {
  const std::string path = TRAINERD_PROMTOOL;
  if (!std::filesystem::exists(path)) {
    *error = "promtool not found (CMake found '" + path +
             "'). It is part of Debian's prometheus package: run scripts/install-deps.sh, "
             "then re-run cmake.";
    return "";
  }
  return path;
}

CommandResult RunCommand(const std::vector<std::string>& argv) {
  trainerd::testing::ChildProcess child(argv);
  CommandResult result;
  for (const std::string& line : child.ReadAllLines()) result.output += line + "\n";
  result.output += child.ReadAllStderr();
  result.exit_code = child.ExitCode();
  return result;
}

}  // namespace trainerd::deploy::testing
