#include "trainerd/common/divergence.h"

#include <gtest/gtest.h>

namespace trainerd {
namespace {

TEST(DivergenceTest, JensenShannonInBitsFromZeroToOne) {
  EXPECT_EQ(JensenShannonBits({3, 1}, {6, 2}), 0.0) << "the same shares, other totals";
  EXPECT_DOUBLE_EQ(*JensenShannonBits({1, 0}, {0, 1}), 1.0);
  // m = (0.75, 0.25): (0.5 log2(0.5/0.75) + 0.5 log2(0.5/0.25) + log2(1/0.75)) / 2.
  EXPECT_NEAR(*JensenShannonBits({1, 1}, {1, 0}), 0.311278, 1e-6);
  EXPECT_NEAR(*JensenShannonBits({1, 0}, {1, 1}), 0.311278, 1e-6) << "symmetric";
  EXPECT_NEAR(*JensenShannonBits({1, 1}, {1}), 0.311278, 1e-6) << "a missing bin is empty";
}

TEST(DivergenceTest, NoneWhenEitherCountsNothing) {
  EXPECT_EQ(JensenShannonBits({}, {1}), std::nullopt);
  EXPECT_EQ(JensenShannonBits({0, 0}, {1, 2}), std::nullopt);
}

}  // namespace
}  // namespace trainerd
