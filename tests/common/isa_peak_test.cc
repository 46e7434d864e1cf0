// The instruction set's roof beside the measured peak (isa_peak.h): FLOPs per cycle per
// level, the roof of a described CPU, the flag for a peak far below it with its reason, and
// this machine's clock.
#include "trainerd/common/isa_peak.h"

#include <gtest/gtest.h>

namespace trainerd {
namespace {

const CpuIsa kAvx2 = ParseCpuIsa("sse2 avx fma avx2");
const CpuIsa kAvx512 = ParseCpuIsa("sse2 avx fma avx2 avx512f");

TEST(IsaPeakTest, FlopsPerCycleDoubleWithEachVectorWidthAndFma) {
  EXPECT_EQ(Fp32FlopsPerCycle(IsaLevel::kSse), 8);
  EXPECT_EQ(Fp32FlopsPerCycle(IsaLevel::kAvx), 16);
  EXPECT_EQ(Fp32FlopsPerCycle(IsaLevel::kAvx2), 32);
  EXPECT_EQ(Fp32FlopsPerCycle(IsaLevel::kAvx512), 64);
  EXPECT_EQ(Fp32FlopsPerCycle(IsaLevel::kUnknown), 0);
}

TEST(IsaPeakTest, TheRoofIsThreadsTimesFlopsPerCycleTimesTheClock) {
  const IsaPeak epyc = Fp32IsaPeak(kAvx2, 2, 2.6e9);
  EXPECT_DOUBLE_EQ(epyc.flops_per_second, 2 * 32 * 2.6e9);
  EXPECT_EQ(epyc.how, "2 threads x 32 fp32 FLOP/cycle (AVX2) x 2.6 GHz");
  EXPECT_DOUBLE_EQ(Fp32IsaPeak(kAvx512, 1, 2e9).flops_per_second, 128e9);
  EXPECT_EQ(Fp32IsaPeak(kAvx512, 0, 2e9).flops_per_second, 0);
  EXPECT_EQ(Fp32IsaPeak(kAvx2, 2, 0).flops_per_second, 0) << "an unknown clock gives no roof";
  EXPECT_EQ(Fp32IsaPeak(ParseCpuIsa(""), 2, 2e9).flops_per_second, 0);
}

// The Xeon: OpenBLAS's Prescott kernels measured 30 GFLOP/s on one thread of an
// AVX-512 core whose roof is 64 x 2.1 GHz = 134 GFLOP/s: flagged, with the BLAS as the reason.
// A peak at 73 % of its roof (this EPYC's measured 1.15e11 of 1.57e11) is not, nor one at
// 45 % (a Xeon with one FMA unit per core, where the roof counts two).
TEST(IsaPeakTest, APeakFarBelowTheRoofIsFlaggedWithItsReason) {
  const IsaPeak xeon = Fp32IsaPeak(kAvx512, 1, 2.1e9);
  const std::optional<std::string> flag =
      PeakBelowTheIsa(30e9, xeon, "OpenBLAS 0.3.21 chose its Prescott kernels (SSE)");
  ASSERT_TRUE(flag.has_value());
  EXPECT_EQ(*flag,
            "the measured fp32 peak of matrix products, 30 GFLOP/s, is 22 % of what the "
            "instruction set allows (134 GFLOP/s: 1 thread x 64 fp32 FLOP/cycle (AVX-512) x "
            "2.1 GHz), so MFU is measured against a low peak: OpenBLAS 0.3.21 chose its "
            "Prescott kernels (SSE)");
  EXPECT_NE(PeakBelowTheIsa(30e9, xeon, std::nullopt)->find("the cause is not known"),
            std::string::npos);
  EXPECT_FALSE(PeakBelowTheIsa(1.15e11, Fp32IsaPeak(kAvx2, 2, 2.445e9), std::nullopt));
  EXPECT_FALSE(PeakBelowTheIsa(0.45 * xeon.flops_per_second, xeon, std::nullopt));
  EXPECT_TRUE(PeakBelowTheIsa(0.29 * xeon.flops_per_second, xeon, std::nullopt));
  EXPECT_FALSE(PeakBelowTheIsa(30e9, IsaPeak{}, std::nullopt)) << "no roof, no flag";
  EXPECT_FALSE(PeakBelowTheIsa(0, xeon, std::nullopt)) << "no peak measured, no flag";
}

// This machine's kernel gives a clock (cpufreq, or /proc/cpuinfo's "cpu MHz" in a VM).
TEST(IsaPeakTest, ThisMachinesClockIsRead) {
  const double hz = ThisCpuClockHz();
  EXPECT_GT(hz, 1e8);
  EXPECT_LT(hz, 1e10);
}

}  // namespace
}  // namespace trainerd
