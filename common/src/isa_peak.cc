#include "trainerd/common/isa_peak.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "trainerd/common/proc_file.h"

namespace trainerd {
namespace {

// `value` with `digits` significant digits.
std::string Figure(double value, int digits) {
  char text[32];
  std::snprintf(text, sizeof text, "%.*g", digits, value);
  return text;
}

}  // namespace

double Fp32FlopsPerCycle(IsaLevel level) {
  switch (level) {
    case IsaLevel::kAvx512:
      return 64;
    case IsaLevel::kAvx2:
      return 32;
    case IsaLevel::kAvx:
      return 16;
    case IsaLevel::kSse:
      return 8;
    case IsaLevel::kUnknown:
      break;
  }
  return 0;
}

IsaPeak Fp32IsaPeak(const CpuIsa& isa, int threads, double clock_hz) {
  const double per_cycle = Fp32FlopsPerCycle(isa.level);
  if (per_cycle <= 0 || clock_hz <= 0 || threads <= 0) return {};
  return {threads * per_cycle * clock_hz,
          std::to_string(threads) + (threads == 1 ? " thread" : " threads") + " x " +
              Figure(per_cycle, 3) + " fp32 FLOP/cycle (" + ToString(isa.level) + ") x " +
              Figure(clock_hz / 1e9, 3) + " GHz"};
}

double ThisCpuClockHz() {
  std::ifstream max_khz("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq");
  if (double khz = 0; max_khz >> khz && khz > 0) return khz * 1e3;
  const std::string mhz = ProcFileValue("/proc/cpuinfo", "cpu MHz");
  return mhz.empty() ? 0 : std::atof(mhz.c_str()) * 1e6;
}

std::optional<std::string> PeakBelowTheIsa(double measured, const IsaPeak& roof,
                                           const std::optional<std::string>& reason) {
  if (!(roof.flops_per_second > 0) || !(measured > 0) ||
      measured >= kPeakBelowIsaFraction * roof.flops_per_second) {
    return std::nullopt;
  }
  return "the measured fp32 peak of matrix products, " + Figure(measured / 1e9, 3) +
         " GFLOP/s, is " + Figure(100 * measured / roof.flops_per_second, 2) +
         " % of what the instruction set allows (" + Figure(roof.flops_per_second / 1e9, 3) +
         " GFLOP/s: " + roof.how + "), so MFU is measured against a low peak: " +
         reason.value_or(
             "the cause is not known (another process on the cores, a throttled "
             "or shared CPU, a BLAS that names no kernels)");
}

}  // namespace trainerd
