// Eight float lanes in GCC vector extensions, for the trainer's own vectorised kernels
// (blockwise_attention.cc, gelu.cc): one AVX register in a function's AVX2 clone
// (target_clones("avx2", "default")), two SSE registers in its default one. Internal to the
// trainer library. Everything here is inlined into the clone that calls it, so the ABI of
// passing 32-byte vectors (GCC's -Wpsabi note) never applies: including this turns the note
// off for the including file (it is given at the end of the file, so no push/pop can scope it).
#pragma once

#pragma GCC diagnostic ignored "-Wpsabi"

#include <bit>
#include <cstdint>
#include <cstring>

namespace trainerd::lanes {

using Float8 = float __attribute__((vector_size(32)));
using Int8 = std::int32_t __attribute__((vector_size(32)));
constexpr std::int64_t kLanes = 8;

// Lanes [0, count) of `from` (count <= 8), the others `fill`.
__attribute__((always_inline)) inline Float8 Load(const float* from, std::int64_t count = kLanes,
                                                  float fill = 0) {
  Float8 v = {fill, fill, fill, fill, fill, fill, fill, fill};
  std::memcpy(&v, from, static_cast<std::size_t>(count) * sizeof(float));
  return v;
}

__attribute__((always_inline)) inline void StoreLanes(Float8 v, float* to,
                                                      std::int64_t count = kLanes) {
  std::memcpy(to, &v, static_cast<std::size_t>(count) * sizeof(float));
}

// Keep flags (0 or 1) as floats, lanes [0, count); 0 in the others.
__attribute__((always_inline)) inline Float8 KeepMask(const std::uint8_t* keep,
                                                      std::int64_t count = kLanes) {
  using Byte8 = std::uint8_t __attribute__((vector_size(8)));
  Byte8 bytes = {};
  std::memcpy(&bytes, keep, static_cast<std::size_t>(count));
  return __builtin_convertvector(bytes, Float8);
}

// 1 in lanes [0, count), 0 in the others.
__attribute__((always_inline)) inline Float8 FirstLanes(std::int64_t count) {
  const Float8 index = {0, 1, 2, 3, 4, 5, 6, 7};
  return index < static_cast<float>(count) ? 1.0F + Float8{} : Float8{};
}

// Cephes' expf: range reduction by ln 2 (in two parts) and a degree-6 polynomial, within 2 ulp
// on [-87, 88]; arguments below -87 give about 1e-38 rather than 0.
__attribute__((always_inline)) inline Float8 Exp(Float8 x) {
  x = x < -87.0F ? -87.0F + Float8{} : x;
  x = x > 88.0F ? 88.0F + Float8{} : x;
  const Float8 n = (x * 1.44269504088896341F + 12582912.0F) - 12582912.0F;  // round to nearest
  const Float8 r = x - n * 0.693359375F + n * 2.12194440e-4F;
  Float8 p = 1.9875691500e-4F * r + 1.3981999507e-3F;
  p = p * r + 8.3334519073e-3F;
  p = p * r + 4.1665795894e-2F;
  p = p * r + 1.6666665459e-1F;
  p = p * r + 5.0000001201e-1F;
  p = p * r * r + r + 1.0F;
  const Int8 bits = (__builtin_convertvector(n, Int8) + 127) << 23;
  return p * std::bit_cast<Float8>(bits);
}

// Calls body(j, count) on lanes [j, j + count) of a row of n: whole vectors (count the constant
// kLanes, so that loads and stores are single instructions), then the tail.
template <typename Body>
__attribute__((always_inline)) inline void ForLanes(std::int64_t n, Body body) {
  std::int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) body(j, kLanes);
  if (j < n) body(j, n - j);
}

}  // namespace trainerd::lanes
