// The vector instruction sets this machine's CPU describes itself with (the "flags" line of
// /proc/cpuinfo): what a BLAS, or the kernels LibTorch dispatches to, could use here.
#pragma once

#include <string>
#include <string_view>

namespace trainerd {

// Vector widths in the order a kernel could use them; a CPU's level is its widest.
enum class IsaLevel { kUnknown, kSse, kAvx, kAvx2, kAvx512 };

// "SSE", "AVX", "AVX2", "AVX-512"; "unknown".
const char* ToString(IsaLevel level);

struct CpuIsa {
  IsaLevel level = IsaLevel::kUnknown;  // AVX2 needs FMA too; AVX-512 is its foundation (avx512f)
  bool avx512_bf16 = false;             // bf16 dot products in AVX-512
  bool amx_bf16 = false;                // bf16 tile products (AMX)
  // "AVX-512 with bf16 and AMX", "AVX-512 with bf16", "AVX2", ...: for the run record.
  std::string Description() const;
};

// The instruction sets named by a "flags" value (space-separated names, as /proc/cpuinfo
// writes them); unknown when it names none.
CpuIsa ParseCpuIsa(std::string_view flags);

// This machine's, from the first "flags" line of /proc/cpuinfo; unknown without one. TEST
// ONLY: TRAINERD_TEST_ONLY_CPU_FLAGS, when set, replaces that line (a CPU this one is not).
CpuIsa ThisCpuIsa();

}  // namespace trainerd
