// The CPU's instruction sets from its own description (cpu_isa.h): the flags of CPUs trainerd
// has met, a description with none, and this machine's.
#include "trainerd/common/cpu_isa.h"

#include <gtest/gtest.h>

namespace trainerd {
namespace {

TEST(CpuIsaTest, TheWidestInstructionSetOfTheFlags) {
  // An AMD EPYC (Zen 3) as /proc/cpuinfo names its flags, abridged.
  const CpuIsa epyc =
      ParseCpuIsa("fpu sse sse2 ssse3 fma sse4_1 sse4_2 avx f16c avx2 bmi2 vaes vpclmulqdq");
  EXPECT_EQ(epyc.level, IsaLevel::kAvx2);
  EXPECT_FALSE(epyc.avx512_bf16);
  EXPECT_EQ(epyc.Description(), "AVX2");
  // An Intel Xeon with AVX-512, its bf16 dot products and AMX (Sapphire Rapids), abridged.
  const CpuIsa xeon = ParseCpuIsa(
      "sse2 avx fma avx2 avx512f avx512bw avx512_bf16 avx512_fp16 amx_bf16 amx_tile amx_int8");
  EXPECT_EQ(xeon.level, IsaLevel::kAvx512);
  EXPECT_EQ(xeon.Description(), "AVX-512 with bf16 and AMX");
  // AVX2 kernels need FMA as well.
  EXPECT_EQ(ParseCpuIsa("sse2 avx avx2").level, IsaLevel::kAvx);
  // Whole names only: avx512_bf16 is not avx512f.
  EXPECT_EQ(ParseCpuIsa("sse2 avx512_bf16").level, IsaLevel::kSse);
}

TEST(CpuIsaTest, NoFlagsIsUnknown) {
  EXPECT_EQ(ParseCpuIsa("").level, IsaLevel::kUnknown);
  EXPECT_EQ(ParseCpuIsa("").Description(), "unknown");
}

// Every x86-64 CPU has SSE2; this one describes itself in /proc/cpuinfo.
TEST(CpuIsaTest, ThisMachinesFlagsAreRead) { EXPECT_NE(ThisCpuIsa().level, IsaLevel::kUnknown); }

}  // namespace
}  // namespace trainerd
