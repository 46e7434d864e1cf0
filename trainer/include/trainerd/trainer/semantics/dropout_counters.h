// The counter-based dropout mask (DropoutMasks::kRegenerated): element j of row b is kept when
// a hash of (the row's key, j) is below (1 - p) of its range. The row's key names the sample
// (first_sample + b) and the dropout site, so the mask is a pure function of the sample, the
// site and the element's index in the sample: any kernel that knows the three can draw it,
// forward or backward, in any order (SampleDropout, BlockwiseCausalAttention).
#pragma once

#include <cstdint>

namespace trainerd {

struct DropoutCounters {
  std::uint64_t site_key = 0;     // names the site within the job (seed and site)
  std::int64_t first_sample = 0;  // the training stream index of row 0
  double p = 0;                   // the drop probability, in [0, 1)

  // The key of row `row` (sample first_sample + row), and the hash seed folded from it.
  std::uint64_t RowKey(std::int64_t row) const;
  std::uint32_t RowSeed(std::int64_t row) const;
  // Element j is kept when its hash is below this.
  std::uint32_t KeepBelow() const;
  // What a kept element is multiplied by: 1 / (1 - p).
  double KeptScale() const { return 1 / (1 - p); }
};

// The site key of dropout site `site` under the job seed `seed`.
std::uint64_t DropoutSiteKey(std::uint64_t seed, int site);

// keep[i] = 1 when element first + i of a row whose seed is `row_seed` is kept, else 0, for
// i in [0, count). The hash is MurmurHash3's 32-bit finaliser of the Weyl sequence
// row_seed + index * golden ratio, vectorised (an AVX2 clone where the CPU has it).
void KeepFlags(std::uint32_t row_seed, std::uint32_t first, std::int64_t count,
               std::uint32_t keep_below, std::uint8_t* keep);

// out[i] = in[i] * kept_scale where KeepFlags keeps element first + i, else 0: the flags and
// the product in one vectorised pass over float rows (AVX-512 and AVX2 clones).
void DropFloats(std::uint32_t row_seed, std::uint32_t first, std::int64_t count,
                std::uint32_t keep_below, float kept_scale, const float* in, float* out);

}  // namespace trainerd
