// How far apart two distributions are, as counts over the same bins (a histogram of
// predicted probabilities, of token ids): the Jensen-Shannon divergence in bits, 0 for the
// same distribution and 1 for disjoint ones, symmetric and finite even where one of them has
// an empty bin (the Kullback-Leibler divergence is not).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace trainerd {

// Bins beyond the shorter histogram are empty in it. None when either counts nothing.
std::optional<double> JensenShannonBits(const std::vector<std::int64_t>& p,
                                        const std::vector<std::int64_t>& q);

}  // namespace trainerd
