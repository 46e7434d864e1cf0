// Budget arithmetic without a model: given the static bytes (parameters, gradients,
// optimizer state), activation bytes per sample, the device size and its reserve, the
// largest microbatch that fits and, for a microbatch spread over N identical blocks, the
// activations resident after each block against usable memory. Pure; no torch.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "trainerd/common/status.h"

namespace trainerd {

struct WhatIfInput {
  std::int64_t static_bytes = 0;
  std::int64_t activation_bytes_per_sample = 0;
  std::int64_t device_bytes = 0;
  double reserve_fraction = 0.0;
  int microbatch = 0;  // 0: only the largest microbatch
  int blocks = 1;      // blocks the microbatch's activations are spread over
};

struct WhatIfBlock {
  int block = 0;  // 1-based
  std::int64_t activation_bytes = 0;
  std::int64_t cumulative_bytes = 0;
};

struct WhatIfResult {
  std::int64_t usable_bytes = 0;
  std::int64_t max_microbatch = 0;  // 0: not even one sample fits
  std::vector<WhatIfBlock> blocks;  // empty when no microbatch was given
  std::int64_t total_bytes = 0;     // static + activations of the microbatch
  bool fits = false;

  nlohmann::json ToJson() const;
  std::string ToText(const WhatIfInput& input) const;
};

// InvalidArgument for non-positive sizes, a reserve outside [0, 1) or blocks < 1.
Result<WhatIfResult> ComputeWhatIf(const WhatIfInput& input);

}  // namespace trainerd
