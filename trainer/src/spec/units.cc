#include "trainerd/trainer/spec/units.h"

#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <utility>

namespace trainerd {
namespace {

// Splits "0.34GB" into 0.34 and "GB". Fails on an empty or malformed number.
bool SplitNumber(std::string_view text, double* number, std::string_view* suffix) {
  std::size_t end = 0;
  while (end < text.size() && (std::isdigit(static_cast<unsigned char>(text[end])) ||
                               text[end] == '.' || text[end] == 'e' || text[end] == 'E')) {
    // An exponent marker only counts when a digit follows it ("1e9"), not in a suffix.
    if ((text[end] == 'e' || text[end] == 'E') &&
        (end + 1 >= text.size() || !std::isdigit(static_cast<unsigned char>(text[end + 1])))) {
      break;
    }
    ++end;
  }
  if (end == 0) return false;
  std::string digits(text.substr(0, end));
  char* parsed_end = nullptr;
  *number = std::strtod(digits.c_str(), &parsed_end);
  if (parsed_end != digits.c_str() + digits.size() || !std::isfinite(*number)) return false;
  *suffix = text.substr(end);
  while (!suffix->empty() && suffix->front() == ' ') suffix->remove_prefix(1);
  return true;
}

}  // namespace

Result<std::int64_t> ParseBytes(std::string_view text) {
  static constexpr std::array<std::pair<std::string_view, double>, 10> kUnits = {{
      {"", 1.0},
      {"B", 1.0},
      {"KB", 1e3},
      {"MB", 1e6},
      {"GB", 1e9},
      {"TB", 1e12},
      {"KiB", 1024.0},
      {"MiB", 1024.0 * 1024},
      {"GiB", 1024.0 * 1024 * 1024},
      {"TiB", 1024.0 * 1024 * 1024 * 1024},
  }};
  double number = 0;
  std::string_view suffix;
  if (!SplitNumber(text, &number, &suffix)) {
    return Status::InvalidArgument("'" + std::string(text) +
                                   "' is not a size (expected e.g. 24GiB, 512MiB, 0.34GB)");
  }
  for (const auto& [name, scale] : kUnits) {
    if (suffix == name) {
      double bytes = std::round(number * scale);
      if (bytes < 0 || bytes > 9.0e18) {
        return Status::InvalidArgument("size '" + std::string(text) + "' is out of range");
      }
      return static_cast<std::int64_t>(bytes);
    }
  }
  return Status::InvalidArgument("unknown size unit '" + std::string(suffix) + "' in '" +
                                 std::string(text) + "' (expected B, KB, MB, GB, KiB, MiB, GiB)");
}

Result<double> ParseDurationSeconds(std::string_view text) {
  const std::string original(text);
  if (text.empty()) return Status::InvalidArgument("empty duration");
  double total = 0;
  bool any = false;
  while (!text.empty()) {
    double number = 0;
    std::string_view rest;
    if (!SplitNumber(text, &number, &rest)) {
      return Status::InvalidArgument("'" + original +
                                     "' is not a duration (expected e.g. 6h, 90m, 45s, 1h30m)");
    }
    double scale = 1.0;
    std::size_t unit_len = 0;
    if (!rest.empty()) {
      switch (rest.front()) {
        case 'h':
          scale = 3600;
          unit_len = 1;
          break;
        case 'm':
          scale = 60;
          unit_len = 1;
          break;
        case 's':
          scale = 1;
          unit_len = 1;
          break;
        default:
          return Status::InvalidArgument("unknown duration unit in '" + original +
                                         "' (expected h, m or s)");
      }
    } else if (any) {
      return Status::InvalidArgument("duration '" + original + "' has a number without a unit");
    }
    total += number * scale;
    any = true;
    text = rest.substr(unit_len);
  }
  return total;
}

Result<double> ParseFraction(std::string_view text) {
  const bool percent = !text.empty() && text.back() == '%';
  const std::string number(percent ? text.substr(0, text.size() - 1) : text);
  char* end = nullptr;
  const double parsed = std::strtod(number.c_str(), &end);
  if (number.empty() || end != number.c_str() + number.size() || !std::isfinite(parsed)) {
    return Status::InvalidArgument("'" + std::string(text) +
                                   "' is not a fraction (expected e.g. 0.1 or 10%)");
  }
  return percent ? parsed / 100.0 : parsed;
}

std::string FormatBytes(std::int64_t bytes) {
  static constexpr std::array<std::string_view, 5> kNames = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  std::size_t unit = 0;
  while (std::fabs(value) >= 1024.0 && unit + 1 < kNames.size()) {
    value /= 1024.0;
    ++unit;
  }
  char buffer[48];
  if (unit == 0) {
    std::snprintf(buffer, sizeof(buffer), "%lld B", static_cast<long long>(bytes));
  } else {
    std::snprintf(buffer, sizeof(buffer), "%.2f %s", value, kNames[unit].data());
  }
  return buffer;
}

std::string FormatDuration(double seconds) {
  char buffer[48];
  if (!std::isfinite(seconds)) return "?";
  if (seconds < 60) {
    std::snprintf(buffer, sizeof(buffer), "%.1fs", seconds);
  } else if (seconds < 3600) {
    auto s = static_cast<long>(seconds);
    std::snprintf(buffer, sizeof(buffer), "%ldm %02lds", s / 60, s % 60);
  } else if (seconds < 1e15) {
    auto s = static_cast<long>(seconds);
    std::snprintf(buffer, sizeof(buffer), "%ldh %02ldm", s / 3600, (s % 3600) / 60);
  } else {  // no real duration; casting it to long would be undefined (a worker's bad ETA)
    std::snprintf(buffer, sizeof(buffer), "%.3gh", seconds / 3600);
  }
  return buffer;
}

}  // namespace trainerd
