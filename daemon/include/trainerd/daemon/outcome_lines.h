// Outcomes as the serving side reports them (trainerctl outcome add, trainerctl outcome
// import FILE): one line each, naming its release by id or by its model's hash, before the
// daemon resolves and checks them against the store (docs/outcomes.md).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "trainerd/common/status.h"

namespace trainerd::daemon {

struct OutcomeLine {
  int line = 0;         // the line of its file, 1-based; 0 for trainerctl outcome add
  std::string release;  // a release id, or 12 or more hex digits starting its model.pt's sha256
  std::string slice;
  std::string metric;
  double value = 0;                         // finite
  std::int64_t count = 1;                   // >= 1: `value` is the mean of this many outcomes
  std::optional<double> at = std::nullopt;  // Unix seconds; none: when the daemon receives it

  bool operator==(const OutcomeLine&) const = default;
};

// A time as an outcome gives it: Unix seconds ("1764928800", "1764928800.5") or ISO 8601 in
// UTC ("2026-12-05T10:00:00Z", fractional seconds allowed). None otherwise.
std::optional<double> ParseOutcomeTime(const std::string& text);

// An import file: JSON lines (an object per line with release, slice, metric, value and
// optionally count and at) or CSV (a header line naming those columns in any order, then a
// row per line; fields may be double-quoted). Blank lines are skipped. InvalidArgument
// naming "source:line" and the field for the first bad line; an empty file is one too.
Result<std::vector<OutcomeLine>> ParseOutcomeFile(const std::string& text,
                                                  const std::string& source);

// The control request's form of a line, and back. FromJson checks every field as
// ParseOutcomeFile does: InvalidArgument naming `where` and the field.
nlohmann::json ToJson(const OutcomeLine& line);
Result<OutcomeLine> OutcomeLineFromJson(const nlohmann::json& json, const std::string& where);

}  // namespace trainerd::daemon
