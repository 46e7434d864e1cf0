// The roofline arithmetic on a case computed by hand: a [64, 128] x [128, 32] fp32 matrix
// product does 2 x 64 x 128 x 32 = 524 288 FLOPs and moves 4 x (64x128 + 128x32 + 64x32) =
// 57 344 bytes, an intensity of 9.142857 FLOP per byte.
#include "profile/roofline.h"

#include <gtest/gtest.h>

namespace trainerd {
namespace {

constexpr double kFlops = 2.0 * 64 * 128 * 32;
constexpr double kBytes = 4.0 * (64 * 128 + 128 * 32 + 64 * 32);

TEST(RooflineTest, AMatrixProductBelowTheRidgeIsBoundByMemory) {
  const Roof roof{1e11, 1e10};  // ridge at 10 FLOP per byte
  EXPECT_DOUBLE_EQ(roof.RidgeIntensity(), 10.0);
  const RooflinePoint p = PlaceOnRoofline(roof, kFlops, kBytes, 1e-5);
  EXPECT_DOUBLE_EQ(kFlops, 524288.0);
  EXPECT_DOUBLE_EQ(kBytes, 57344.0);
  EXPECT_NEAR(p.intensity, 9.142857142857142, 1e-12);
  EXPECT_EQ(p.bound, "memory");
  EXPECT_NEAR(p.attainable_flops, 9.142857142857142e10, 1e-2);  // I x B, under P
  EXPECT_NEAR(p.achieved_flops, 5.24288e10, 1e-2);
  EXPECT_NEAR(p.fraction_of_bound, 5.24288e10 / 9.142857142857142e10, 1e-12);
  EXPECT_NEAR(p.achieved_bytes_per_second, 5.7344e9, 1e-3);
}

TEST(RooflineTest, AboveTheRidgeTheBoundIsThePeak) {
  const Roof roof{1e11, 1e11};  // ridge at 1
  const RooflinePoint p = PlaceOnRoofline(roof, kFlops, kBytes, 1e-5);
  EXPECT_EQ(p.bound, "compute");
  EXPECT_DOUBLE_EQ(p.attainable_flops, 1e11);
  EXPECT_NEAR(p.fraction_of_bound, 0.524288, 1e-12);
}

TEST(RooflineTest, UncountedFlopsAreJudgedOnBandwidth) {
  const RooflinePoint p = PlaceOnRoofline({1e11, 2e10}, 0, 1e9, 0.1);  // 10 GB/s of 20
  EXPECT_EQ(p.bound, "memory");
  EXPECT_DOUBLE_EQ(p.attainable_flops, 0);
  EXPECT_DOUBLE_EQ(p.fraction_of_bound, 0.5);
  EXPECT_EQ(PlaceOnRoofline({1e11, 2e10}, 0, 0, 0.1).bound, "");  // nothing known
}

}  // namespace
}  // namespace trainerd
