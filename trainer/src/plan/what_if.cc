#include "trainerd/trainer/plan/what_if.h"

#include <cmath>
#include <cstdio>

namespace trainerd {
namespace {

std::string Gb(std::int64_t bytes) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.2f GB", static_cast<double>(bytes) / 1e9);
  return buffer;
}

}  // namespace

Result<WhatIfResult> ComputeWhatIf(const WhatIfInput& input) {
  if (input.static_bytes < 0 || input.activation_bytes_per_sample <= 0 || input.device_bytes <= 0) {
    return Status::InvalidArgument(
        "--static must be >= 0, --act-per-sample and --device must be positive sizes");
  }
  if (input.reserve_fraction < 0 || input.reserve_fraction >= 1) {
    return Status::InvalidArgument("--reserve must be in [0, 1), e.g. 10%");
  }
  if (input.blocks < 1 || input.microbatch < 0) {
    return Status::InvalidArgument("--blocks must be >= 1 and --microbatch >= 0");
  }
  WhatIfResult result;
  result.usable_bytes = static_cast<std::int64_t>(
      std::floor(static_cast<double>(input.device_bytes) * (1.0 - input.reserve_fraction)));
  const std::int64_t room = result.usable_bytes - input.static_bytes;
  result.max_microbatch = room > 0 ? room / input.activation_bytes_per_sample : 0;
  const std::int64_t activations =
      static_cast<std::int64_t>(input.microbatch) * input.activation_bytes_per_sample;
  result.total_bytes = input.static_bytes + activations;
  result.fits = result.total_bytes <= result.usable_bytes && (input.microbatch > 0 || room >= 0);
  if (input.microbatch > 0) {
    for (int b = 1; b <= input.blocks; ++b) {
      // Cumulative from the exact total so rounding never drifts: block b holds
      // floor(total * b / N) - floor(total * (b - 1) / N).
      const std::int64_t cumulative = activations * b / input.blocks;
      const std::int64_t previous = activations * (b - 1) / input.blocks;
      result.blocks.push_back({b, cumulative - previous, cumulative});
    }
  }
  return result;
}

nlohmann::json WhatIfResult::ToJson() const {
  nlohmann::json list = nlohmann::json::array();
  for (const WhatIfBlock& b : blocks) {
    list.push_back({{"block", b.block},
                    {"activation_bytes", b.activation_bytes},
                    {"cumulative_bytes", b.cumulative_bytes}});
  }
  return {{"max_microbatch", max_microbatch},
          {"usable_bytes", usable_bytes},
          {"blocks", list},
          {"total_bytes", total_bytes},
          {"fits", fits}};
}

std::string WhatIfResult::ToText(const WhatIfInput& input) const {
  std::string out;
  char line[200];
  std::snprintf(line, sizeof(line), "usable memory: %s (%s device, %.0f%% reserve)\n",
                Gb(usable_bytes).c_str(), Gb(input.device_bytes).c_str(),
                input.reserve_fraction * 100);
  out += line;
  std::snprintf(line, sizeof(line),
                "largest microbatch that fits: %lld (static %s + %s per sample)\n",
                static_cast<long long>(max_microbatch), Gb(input.static_bytes).c_str(),
                Gb(input.activation_bytes_per_sample).c_str());
  out += line;
  if (blocks.empty()) return out;
  std::snprintf(line, sizeof(line), "\nmicrobatch %d over %d blocks:\n%-6s %14s %14s\n",
                input.microbatch, input.blocks, "block", "activations", "cumulative");
  out += line;
  for (const WhatIfBlock& b : blocks) {
    std::snprintf(line, sizeof(line), "%-6d %14s %14s\n", b.block, Gb(b.activation_bytes).c_str(),
                  Gb(b.cumulative_bytes).c_str());
    out += line;
  }
  std::snprintf(line, sizeof(line), "total %s of %s usable: %s\n", Gb(total_bytes).c_str(),
                Gb(usable_bytes).c_str(), fits ? "fits" : "DOES NOT FIT");
  out += line;
  return out;
}

}  // namespace trainerd
