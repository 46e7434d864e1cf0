// SplitMix64's finaliser: a fast, well-mixed 64-bit hash, for stateless sampling (which window
// is sample i, which dropout mask has sample i at a site) from (seed, index) alone.
#pragma once

#include <cstdint>

namespace trainerd {

constexpr std::uint64_t Mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace trainerd
