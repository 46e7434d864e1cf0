#include "trainerd/trainer/semantics/dropout_counters.h"

#include <algorithm>

#include "trainerd/common/mix.h"

namespace trainerd {

std::uint64_t DropoutSiteKey(std::uint64_t seed, int site) {
  return Mix(seed ^ Mix(static_cast<std::uint64_t>(site) + 1));
}

std::uint64_t DropoutCounters::RowKey(std::int64_t row) const {
  return Mix(site_key ^ Mix(static_cast<std::uint64_t>(first_sample + row)));
}

std::uint32_t DropoutCounters::RowSeed(std::int64_t row) const {
  const std::uint64_t key = RowKey(row);
  return static_cast<std::uint32_t>(key ^ (key >> 32));
}

std::uint32_t DropoutCounters::KeepBelow() const {
  return static_cast<std::uint32_t>(std::min((1 - p) * 0x1p32, 0x1p32 - 1));
}

namespace {

// MurmurHash3's 32-bit finaliser of element `index` of the row whose seed is `row_seed`.
__attribute__((always_inline)) inline std::uint32_t ElementHash(std::uint32_t row_seed,
                                                                std::uint32_t index) {
  std::uint32_t x = row_seed + index * 0x9E3779B9U;
  x ^= x >> 16;
  x *= 0x85EBCA6BU;
  x ^= x >> 13;
  x *= 0xC2B2AE35U;
  x ^= x >> 16;
  return x;
}

}  // namespace

__attribute__((target_clones("avx2", "default"))) void KeepFlags(std::uint32_t row_seed,
                                                                 std::uint32_t first,
                                                                 std::int64_t count,
                                                                 std::uint32_t keep_below,
                                                                 std::uint8_t* keep) {
  for (std::int64_t i = 0; i < count; ++i) {
    keep[i] = ElementHash(row_seed, first + static_cast<std::uint32_t>(i)) < keep_below ? 1 : 0;
  }
}

__attribute__((target_clones("arch=x86-64-v4", "avx2", "default"))) void DropFloats(
    std::uint32_t row_seed, std::uint32_t first, std::int64_t count, std::uint32_t keep_below,
    float kept_scale, const float* in, float* out) {
  for (std::int64_t i = 0; i < count; ++i) {
    const bool kept = ElementHash(row_seed, first + static_cast<std::uint32_t>(i)) < keep_below;
    out[i] = kept ? in[i] * kept_scale : 0.0F;
  }
}

}  // namespace trainerd
