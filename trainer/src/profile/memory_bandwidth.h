// The memory bandwidth of a device, measured the way STREAM does: copy (a = b, 2 x N x 4 bytes)
// and triad (a = b + s x c, 3 x N x 4 bytes) over fp32 arrays far larger than the caches,
// timed between device synchronisations, the best of 5 each; the larger of the two in
// bytes/s. The roof under memory-bound work on the roofline (roofline.h). About a second.
#pragma once

#include <torch/types.h>

#include <cstdint>

namespace trainerd {

double MeasureMemoryBandwidth(const torch::Device& device, std::int64_t array_bytes = 64 << 20);

}  // namespace trainerd
