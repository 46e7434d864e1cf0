// The second roof beside the measured peak of matrix products: what the CPU's instruction set
// allows the threads that multiply, from the CPU's own description (threads x FLOPs per cycle
// x clock). A measured peak far below it is flagged with the reason, since the measured peak
// shares whatever slows the products down (a BLAS on generic kernels) and MFU then looks
// healthy.
#pragma once

#include <optional>
#include <string>

#include "trainerd/common/cpu_isa.h"

namespace trainerd {

// fp32 FLOPs one core can issue per cycle at `level`, counting a fused multiply-add as 2 and
// two vector units per core (Intel Xeon Gold/Platinum, AMD Zen): SSE 8 (4 lanes, a multiply
// and an add), AVX 16, AVX2 with FMA 32, AVX-512 64; 0 for unknown.
double Fp32FlopsPerCycle(IsaLevel level);

struct IsaPeak {
  double flops_per_second = 0;  // 0 when the clock or the instruction set is unknown
  // "2 threads x 32 fp32 FLOP/cycle (AVX2) x 2.60 GHz"
  std::string how;
};

// The fp32 roof of `threads` threads, each counted as a core, at `clock_hz`.
IsaPeak Fp32IsaPeak(const CpuIsa& isa, int threads, double clock_hz);

// The CPU's clock in Hz: cpufreq's cpuinfo_max_freq of cpu0 where the kernel has cpufreq,
// else the "cpu MHz" of /proc/cpuinfo (a virtual machine's nominal clock); 0 when neither.
double ThisCpuClockHz();

// Below this fraction of the roof a measured peak is flagged. SSE3 kernels reach at most a
// quarter of an AVX2 roof and an eighth of an AVX-512 one; a Xeon with one FMA unit per
// core (the roof counts two) reaches half, and is not flagged.
inline constexpr double kPeakBelowIsaFraction = 0.3;

// Why `measured` FLOP/s is below the roof, when it is below kPeakBelowIsaFraction of it:
// `reason` (the BLAS's kernels, when they are the cause) or, without one, that the cause is
// unknown. Nothing for an unknown roof or a peak near it.
std::optional<std::string> PeakBelowTheIsa(double measured, const IsaPeak& roof,
                                           const std::optional<std::string>& reason);

}  // namespace trainerd
