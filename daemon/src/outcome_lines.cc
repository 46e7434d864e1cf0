#include "trainerd/daemon/outcome_lines.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <ctime>
#include <limits>
#include <set>
#include <sstream>

#include "trainerd/common/json_input.h"
#include "trainerd/store/records.h"

namespace trainerd::daemon {
namespace {

constexpr const char* kColumns = "release, slice, metric, value and optionally count and at";

// Times outside 1970-5138 are not times an outcome was observed at.
constexpr double kMaxTime = 1e11;

// Whether `text` is UTF-8, as JSON text (the control request) must be.
bool IsUtf8(const std::string& text) {
  try {
    nlohmann::json(text).dump();
    return true;
  } catch (const nlohmann::json::type_error&) {
    return false;
  }
}

bool IsDigits(const std::string& text) {
  if (text.empty()) return false;
  for (const char c : text) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

bool IsHex(const std::string& text) {
  for (const char c : text) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// The whole of `text` as a double; none for anything else (trailing characters included).
std::optional<double> ParseNumber(const std::string& text) {
  double value = 0;
  const char* end = text.data() + text.size();
  const std::from_chars_result parsed = std::from_chars(text.data(), end, value);
  if (text.empty() || parsed.ec != std::errc() || parsed.ptr != end) return std::nullopt;
  return value;
}

// The fields of one CSV line; quoted fields may hold commas and doubled quotes. None for an
// unterminated quote.
std::optional<std::vector<std::string>> SplitCsv(const std::string& line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        fields.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  if (quoted) return std::nullopt;
  return fields;
}

std::string Trimmed(const std::string& text) {
  const auto first = text.find_first_not_of(" \t\r");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t\r") - first + 1);
}

// A CSV row as the JSON object a JSON line would be: value and count as numbers where they
// are numbers (OutcomeLineFromJson says what is wrong with the rest).
nlohmann::json CsvRowJson(const std::vector<std::string>& header,
                          const std::vector<std::string>& fields) {
  nlohmann::json row = nlohmann::json::object();
  for (std::size_t i = 0; i < header.size(); ++i) {
    const std::string field = Trimmed(fields[i]);
    if (field.empty() && (header[i] == "count" || header[i] == "at")) continue;  // optional
    const std::optional<double> number = ParseNumber(field);
    if (header[i] == "value" && number && std::isfinite(*number)) {
      row[header[i]] = *number;
    } else if (header[i] == "count" && IsDigits(field) && field.size() <= 18) {
      row[header[i]] = std::stoll(field);
    } else {
      row[header[i]] = field;
    }
  }
  return row;
}

Result<std::vector<OutcomeLine>> ParseCsv(std::istringstream& in, const std::string& first_line,
                                          const std::string& source) {
  std::optional<std::vector<std::string>> header = SplitCsv(first_line);
  if (!header) return Status::InvalidArgument(source + ":1: a quoted field is not closed");
  const std::set<std::string> known = {"release", "slice", "metric", "value", "count", "at"};
  std::set<std::string> seen;
  for (std::string& column : *header) {
    column = Trimmed(column);
    if (known.count(column) == 0 || !seen.insert(column).second) {
      return Status::InvalidArgument(source + ":1: the CSV header's column '" + column +
                                     "' is not one of " + kColumns + ", or is repeated");
    }
  }
  for (const char* required : {"release", "slice", "metric", "value"}) {
    if (seen.count(required) == 0) {
      return Status::InvalidArgument(source + ":1: the CSV header has no column '" + required +
                                     "' (" + kColumns + ")");
    }
  }
  std::vector<OutcomeLine> lines;
  std::string text;
  for (int number = 2; std::getline(in, text); ++number) {
    if (Trimmed(text).empty()) continue;
    const std::string where = source + ":" + std::to_string(number);
    std::optional<std::vector<std::string>> fields = SplitCsv(text);
    if (!fields) return Status::InvalidArgument(where + ": a quoted field is not closed");
    if (fields->size() != header->size()) {
      return Status::InvalidArgument(where + ": " + std::to_string(fields->size()) +
                                     " fields, the header names " + std::to_string(header->size()));
    }
    Result<OutcomeLine> line = OutcomeLineFromJson(CsvRowJson(*header, *fields), where);
    if (!line.ok()) return line.status();
    line->line = number;
    lines.push_back(*line);
  }
  return lines;
}

}  // namespace

std::optional<double> ParseOutcomeTime(const std::string& text) {
  if (const std::optional<double> seconds = ParseNumber(text)) {
    return std::isfinite(*seconds) ? seconds : std::nullopt;
  }
  std::tm tm{};
  const char* rest = ::strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (rest == nullptr) return std::nullopt;
  double fraction = 0;
  if (*rest == '.') {
    const char* digits = ++rest;
    while (std::isdigit(static_cast<unsigned char>(*rest))) ++rest;
    if (rest == digits) return std::nullopt;
    // Nanoseconds at most: "0.<400 zeros>1" underflows a double (stod threw out_of_range).
    const std::string kept(digits, std::min<std::size_t>(rest - digits, 9));
    fraction = static_cast<double>(std::stoll(kept)) / std::pow(10.0, kept.size());
  }
  const std::string zone = rest;
  if (zone != "Z" && zone != "+00:00") return std::nullopt;
  return static_cast<double>(::timegm(&tm)) + fraction;
}

nlohmann::json ToJson(const OutcomeLine& line) {
  nlohmann::json json = {{"line", line.line},     {"release", line.release}, {"slice", line.slice},
                         {"metric", line.metric}, {"value", line.value},     {"count", line.count}};
  if (line.at) json["at"] = *line.at;
  return json;
}

Result<OutcomeLine> OutcomeLineFromJson(const nlohmann::json& json, const std::string& where) {
  if (!json.is_object()) {
    return Status::InvalidArgument(where + ": expected an object with " + kColumns);
  }
  OutcomeLine line;
  for (auto item = json.begin(); item != json.end(); ++item) {
    // Named, not a structured binding: clang 14 does not capture those in the lambda.
    const std::string& key = item.key();
    const nlohmann::json& value = item.value();
    const auto bad = [&](const std::string& expected) {
      return Status::InvalidArgument(
          where + ": " + key + ": expected " + expected + ", got " +
          value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    };
    if (key == "line") {
      if (!value.is_number_integer() || value.get<std::int64_t>() < 0 ||
          value.get<std::int64_t>() > std::numeric_limits<int>::max()) {
        return bad("a line number");
      }
      line.line = value.get<int>();
    } else if (key == "release") {
      line.release = value.is_number_unsigned() ? std::to_string(value.get<std::uint64_t>())
                     : value.is_string()        ? value.get<std::string>()
                                                : "";
      // sha256 prefixes as stored: lower case.
      for (char& c : line.release)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (!IsDigits(line.release) && !(line.release.size() >= 12 && IsHex(line.release))) {
        return bad("a release id or 12+ hex digits of its model's sha256");
      }
    } else if (key == "slice" || key == "metric") {
      if (!value.is_string() || value.get<std::string>().empty() ||
          !IsUtf8(value.get<std::string>())) {
        return bad("a name in UTF-8");
      }
      (key == "slice" ? line.slice : line.metric) = value.get<std::string>();
    } else if (key == "value") {
      if (!value.is_number() || !(std::abs(value.get<double>()) <= store::kMaxOutcomeValue)) {
        return bad("a number within +-10^15");
      }
      line.value = value.get<double>();
    } else if (key == "count") {
      if (!value.is_number_integer() || value.get<std::int64_t>() < 1 ||
          value.get<std::int64_t>() > store::kMaxOutcomeCount) {
        return bad("a whole number of outcomes, at least 1 and at most 10^12");
      }
      line.count = value.get<std::int64_t>();
    } else if (key == "at") {
      line.at = value.is_number()   ? std::optional<double>(value.get<double>())
                : value.is_string() ? ParseOutcomeTime(value.get<std::string>())
                                    : std::nullopt;
      if (!line.at || !std::isfinite(*line.at) || *line.at < 0 || *line.at > kMaxTime) {
        return bad("Unix seconds or an ISO 8601 UTC time such as 2026-12-05T10:00:00Z");
      }
    } else {
      return Status::InvalidArgument(where + ": unknown field '" + key + "' (fields: " + kColumns +
                                     ")");
    }
  }
  for (const char* required : {"release", "slice", "metric", "value"}) {
    if (!json.contains(required)) {
      return Status::InvalidArgument(where + ": no " + std::string(required) +
                                     " (fields: " + kColumns + ")");
    }
  }
  return line;
}

Result<std::vector<OutcomeLine>> ParseOutcomeFile(const std::string& text,
                                                  const std::string& source) {
  std::istringstream in(text);
  std::string first;
  int number = 0;
  while (std::getline(in, first)) {
    ++number;
    if (!Trimmed(first).empty()) break;
  }
  if (Trimmed(first).empty()) {
    return Status::InvalidArgument(source + ": no outcomes (expected JSON lines or CSV with " +
                                   kColumns + ")");
  }
  if (Trimmed(first).front() != '{') {
    if (number != 1) {
      return Status::InvalidArgument(source + ":" + std::to_string(number) +
                                     ": a CSV file's header is its first line");
    }
    return ParseCsv(in, first, source);
  }
  std::vector<OutcomeLine> lines;
  std::string text_line = first;
  do {
    if (Trimmed(text_line).empty()) continue;
    const std::string where = source + ":" + std::to_string(number);
    const nlohmann::json json = ParseBoundedJson(text_line);
    if (json.is_discarded()) return Status::InvalidArgument(where + ": not a JSON object");
    Result<OutcomeLine> line = OutcomeLineFromJson(json, where);
    if (!line.ok()) return line.status();
    line->line = number;
    lines.push_back(*line);
  } while (++number, std::getline(in, text_line));
  return lines;
}

}  // namespace trainerd::daemon
