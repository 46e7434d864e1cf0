#include "trainerd/trainer/device/blas_kernel.h"

#include <dlfcn.h>

#include <map>
#include <sstream>

namespace trainerd {
namespace {

using NameFunction = char* (*)();
using VersionFunction = void (*)(char* buffer, int length);

// The widest instruction set of each x86-64 core OpenBLAS 0.3.21 can choose
// (driver/others/dynamic.c) and the later ones.
IsaLevel LevelOfCore(const std::string& core) {
  static const std::map<std::string, IsaLevel> kCores = {{"SkylakeX", IsaLevel::kAvx512},
                                                         {"Cooperlake", IsaLevel::kAvx512},
                                                         {"SapphireRapids", IsaLevel::kAvx512},
                                                         {"Haswell", IsaLevel::kAvx2},
                                                         {"Zen", IsaLevel::kAvx2},
                                                         {"Sandybridge", IsaLevel::kAvx},
                                                         {"Bulldozer", IsaLevel::kAvx},
                                                         {"Piledriver", IsaLevel::kAvx},
                                                         {"Steamroller", IsaLevel::kAvx},
                                                         {"Excavator", IsaLevel::kAvx},
                                                         {"Prescott", IsaLevel::kSse},
                                                         {"Core2", IsaLevel::kSse},
                                                         {"Penryn", IsaLevel::kSse},
                                                         {"Dunnington", IsaLevel::kSse},
                                                         {"Nehalem", IsaLevel::kSse},
                                                         {"Atom", IsaLevel::kSse},
                                                         {"Athlon", IsaLevel::kSse},
                                                         {"Opteron", IsaLevel::kSse},
                                                         {"Opteron_SSE3", IsaLevel::kSse},
                                                         {"Barcelona", IsaLevel::kSse},
                                                         {"Nano", IsaLevel::kSse},
                                                         {"Bobcat", IsaLevel::kSse}};
  const auto found = kCores.find(core);
  return found == kCores.end() ? IsaLevel::kUnknown : found->second;
}

// The first `count` words of `text`.
std::string FirstWords(const std::string& text, int count) {
  std::istringstream words(text);
  std::string out;
  for (std::string word; count-- > 0 && words >> word;) out += (out.empty() ? "" : " ") + word;
  return out;
}

}  // namespace

const char* CoreServing(IsaLevel level) {
  switch (level) {
    case IsaLevel::kAvx512:
      return "SkylakeX";
    case IsaLevel::kAvx2:
      return "Haswell";
    case IsaLevel::kAvx:
      return "Sandybridge";
    case IsaLevel::kSse:
      return "Prescott";
    case IsaLevel::kUnknown:
      break;
  }
  return "unknown";
}

BlasKernel DescribeBlas(const SymbolLookup& lookup) {
  BlasKernel blas;
  if (const auto corename = reinterpret_cast<NameFunction>(lookup("openblas_get_corename"))) {
    blas.core = FirstWords(corename(), 1);
    const auto config = reinterpret_cast<NameFunction>(lookup("openblas_get_config"));
    // "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ...": its name and version.
    blas.library = config ? FirstWords(config(), 2) : "OpenBLAS";
  } else if (const auto version =
                 reinterpret_cast<VersionFunction>(lookup("MKL_Get_Version_String"))) {
    char text[256] = {};
    version(text, sizeof text - 1);
    blas.library = text;
    blas.library.erase(blas.library.find_last_not_of(' ') + 1);
  }
  return blas;
}

BlasKernel DescribeThisBlas() {
  return DescribeBlas([](const char* name) { return ::dlsym(RTLD_DEFAULT, name); });
}

std::optional<std::string> BlasBelowTheCpu(const BlasKernel& blas, const CpuIsa& isa) {
  const IsaLevel core = LevelOfCore(blas.core);
  if (core == IsaLevel::kUnknown || isa.level == IsaLevel::kUnknown || core >= isa.level) {
    return std::nullopt;
  }
  return blas.library + " chose its " + blas.core + " kernels (" + ToString(core) +
         ") on a CPU with " + ToString(isa.level) +
         ": its matrix products run below what the CPU can do. OPENBLAS_CORETYPE=" +
         CoreServing(isa.level) + " makes it choose kernels for " + ToString(isa.level) +
         " (runtime.fix_blas_core, on by default, sets it once they pass a check)";
}

}  // namespace trainerd
