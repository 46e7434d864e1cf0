#include "trainerd/common/cpu_isa.h"

#include <cstdlib>
#include <set>
#include <sstream>

#include "trainerd/common/enum_names.h"
#include "trainerd/common/proc_file.h"

namespace trainerd {

const char* ToString(IsaLevel level) {
  static constexpr EnumNames<IsaLevel, 5> kNames{{{
      {IsaLevel::kUnknown, "unknown"},
      {IsaLevel::kSse, "SSE"},
      {IsaLevel::kAvx, "AVX"},
      {IsaLevel::kAvx2, "AVX2"},
      {IsaLevel::kAvx512, "AVX-512"},
  }}};
  return kNames.Name(level);
}

std::string CpuIsa::Description() const {
  std::string text = ToString(level);
  if (avx512_bf16 && amx_bf16) return text + " with bf16 and AMX";
  if (avx512_bf16) return text + " with bf16";
  if (amx_bf16) return text + " with AMX";
  return text;
}

CpuIsa ParseCpuIsa(std::string_view flags) {
  std::set<std::string> names;
  std::istringstream words{std::string(flags)};
  for (std::string word; words >> word;) names.insert(word);
  const auto has = [&](const char* name) { return names.contains(name); };
  CpuIsa isa;
  if (has("avx512f")) {
    isa.level = IsaLevel::kAvx512;
  } else if (has("avx2") && has("fma")) {
    isa.level = IsaLevel::kAvx2;
  } else if (has("avx")) {
    isa.level = IsaLevel::kAvx;
  } else if (has("sse2")) {
    isa.level = IsaLevel::kSse;
  }
  isa.avx512_bf16 = has("avx512_bf16");
  isa.amx_bf16 = has("amx_bf16");
  return isa;
}

CpuIsa ThisCpuIsa() {
  if (const char* fake = std::getenv("TRAINERD_TEST_ONLY_CPU_FLAGS")) return ParseCpuIsa(fake);
  return ParseCpuIsa(ProcFileValue("/proc/cpuinfo", "flags"));
}

}  // namespace trainerd
