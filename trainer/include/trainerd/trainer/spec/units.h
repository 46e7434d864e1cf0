// Parsing of human-written sizes and durations used in YAML configs and on command lines.
// Sizes: "24GiB", "512MiB", "0.34GB", "1024" (bytes); binary (KiB, MiB, GiB, TiB) and
// decimal (KB, MB, GB, TB) suffixes, case-sensitive as written here, plus "B".
// Durations: "6h", "90m", "45s", "1h30m", "3600" (seconds).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "trainerd/common/status.h"

namespace trainerd {

Result<std::int64_t> ParseBytes(std::string_view text);
Result<double> ParseDurationSeconds(std::string_view text);
// "0.1" or "10%" -> 0.1.
Result<double> ParseFraction(std::string_view text);

// "1.50 GiB", "512.0 MiB", "17 B": for human output only; JSON carries bytes.
std::string FormatBytes(std::int64_t bytes);
// "1h 02m", "3m 07s", "12.4s" ("2.78e+296h" beyond 1e15 s, "?" when not finite): for human
// output only; JSON carries seconds.
std::string FormatDuration(double seconds);

}  // namespace trainerd
