// Which BLAS this process multiplies matrices with, and which of its kernels: OpenBLAS names
// the core it chose when it loaded (by cpuid, or OPENBLAS_CORETYPE), MKL its version. Found
// by symbol in the process, so a BLAS without those symbols reads "unknown", never an error.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "trainerd/common/cpu_isa.h"

namespace trainerd {

struct BlasKernel {
  // "OpenBLAS 0.3.21", "Intel(R) oneAPI Math Kernel Library Version 2024.2-Product Build
  // 20240605 for Intel(R) 64 architecture applications"; "unknown".
  std::string library = "unknown";
  // OpenBLAS's core: "Zen", "Haswell", "SkylakeX", "Prescott"; "unknown" for another BLAS.
  std::string core = "unknown";
};

// Finds a function of the process by name; nullptr when there is none.
using SymbolLookup = std::function<void*(const char* name)>;

// The BLAS as `lookup` finds it.
BlasKernel DescribeBlas(const SymbolLookup& lookup);
// This process's BLAS.
BlasKernel DescribeThisBlas();

// The OpenBLAS core whose kernels serve a CPU of `level`: SkylakeX (AVX-512), Haswell (AVX2),
// Sandybridge (AVX), Prescott (SSE3). OpenBLAS 0.3.21 cannot be
// made to choose Cooperlake, its bf16 core: its OPENBLAS_CORETYPE list stops one name short.
const char* CoreServing(IsaLevel level);

// Why matrix products run below what the CPU can do: OpenBLAS chose a core whose kernels use
// a narrower instruction set than `isa` has (seen: Debian's OpenBLAS 0.3.21 picks Prescott,
// SSE3, on Xeons it does not know, at a quarter of the AVX-512 kernels' rate). Nothing when
// the core serves the CPU, and for a BLAS or a core it cannot place.
std::optional<std::string> BlasBelowTheCpu(const BlasKernel& blas, const CpuIsa& isa);

}  // namespace trainerd
