// Which BLAS and which of its kernels (blas_kernel.h): OpenBLAS's core and version and MKL's
// version through fake symbols, a BLAS without them, the flag for a core narrower than the
// CPU; this process's BLAS; and a real trainer-run whose OpenBLAS was made to choose Prescott.
#include "trainerd/trainer/device/blas_kernel.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "../support/child_process.h"
#include "../support/temp_dir.h"
#include "../support/tiny_job.h"

namespace trainerd {
namespace {

char* PrescottCore() { return const_cast<char*>("Prescott"); }
char* PrescottConfig() {
  return const_cast<char*>(
      "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY USE_OPENMP Prescott MAX_THREADS=64");
}
void MklVersion(char* buffer, int length) {
  std::snprintf(buffer, static_cast<std::size_t>(length), "%s",
                "Intel(R) oneAPI Math Kernel Library Version 2024.2-Product Build 20240605   ");
}

// A process whose symbols are `symbols`.
SymbolLookup Symbols(std::map<std::string, void*> symbols) {
  return [symbols](const char* name) -> void* {
    const auto found = symbols.find(name);
    return found == symbols.end() ? nullptr : found->second;
  };
}

const CpuIsa kAvx512 = ParseCpuIsa("sse2 avx fma avx2 avx512f");
const CpuIsa kAvx2 = ParseCpuIsa("sse2 avx fma avx2");

TEST(BlasKernelTest, OpenBlasNamesItsCoreAndVersion) {
  const BlasKernel blas =
      DescribeBlas(Symbols({{"openblas_get_corename", reinterpret_cast<void*>(&PrescottCore)},
                            {"openblas_get_config", reinterpret_cast<void*>(&PrescottConfig)}}));
  EXPECT_EQ(blas.library, "OpenBLAS 0.3.21");
  EXPECT_EQ(blas.core, "Prescott");
}

TEST(BlasKernelTest, MklNamesItsVersion) {
  const BlasKernel blas =
      DescribeBlas(Symbols({{"MKL_Get_Version_String", reinterpret_cast<void*>(&MklVersion)}}));
  EXPECT_EQ(blas.library,
            "Intel(R) oneAPI Math Kernel Library Version 2024.2-Product Build 20240605");
  EXPECT_EQ(blas.core, "unknown");
  EXPECT_FALSE(BlasBelowTheCpu(blas, kAvx512).has_value()) << "no core to judge";
}

TEST(BlasKernelTest, ABlasWithoutTheSymbolsIsUnknownNotAnError) {
  const BlasKernel blas = DescribeBlas(Symbols({}));
  EXPECT_EQ(blas.library, "unknown");
  EXPECT_EQ(blas.core, "unknown");
  EXPECT_FALSE(BlasBelowTheCpu(blas, kAvx512).has_value());
}

// Debian's OpenBLAS 0.3.21 picks Prescott (SSE3) on CPUs it does not know: flagged, with the
// core that serves the CPU. A core as wide as the CPU is not flagged.
TEST(BlasKernelTest, ACoreNarrowerThanTheCpuIsFlaggedWithTheCoreThatServesIt) {
  const BlasKernel prescott{"OpenBLAS 0.3.21", "Prescott"};
  const std::optional<std::string> on_avx512 = BlasBelowTheCpu(prescott, kAvx512);
  ASSERT_TRUE(on_avx512.has_value());
  EXPECT_TRUE(on_avx512->starts_with(
      "OpenBLAS 0.3.21 chose its Prescott kernels (SSE) on a CPU with AVX-512"))
      << *on_avx512;
  EXPECT_NE(on_avx512->find("OPENBLAS_CORETYPE=SkylakeX"), std::string::npos) << *on_avx512;
  const std::optional<std::string> on_avx2 = BlasBelowTheCpu(prescott, kAvx2);
  ASSERT_TRUE(on_avx2.has_value());
  EXPECT_NE(on_avx2->find("OPENBLAS_CORETYPE=Haswell"), std::string::npos) << *on_avx2;
  EXPECT_TRUE(BlasBelowTheCpu({"OpenBLAS 0.3.21", "Haswell"}, kAvx512).has_value());
  EXPECT_FALSE(BlasBelowTheCpu({"OpenBLAS 0.3.21", "Zen"}, kAvx2).has_value());
  EXPECT_FALSE(BlasBelowTheCpu({"OpenBLAS 0.3.21", "SkylakeX"}, kAvx512).has_value());
  EXPECT_FALSE(BlasBelowTheCpu({"OpenBLAS 0.3.21", "SomeFutureCore"}, kAvx512).has_value());
}

// Debian's LibTorch multiplies with OpenBLAS, the pip wheel's with MKL: both name themselves.
TEST(BlasKernelTest, ThisProcessesBlasIsNamed) {
  const BlasKernel blas = DescribeThisBlas();
  EXPECT_NE(blas.library, "unknown");
  if (blas.library.starts_with("OpenBLAS")) {
    EXPECT_NE(blas.core, "unknown");
  }
}

// OPENBLAS_CORETYPE (read when OpenBLAS loads) makes it choose Prescott: trainer-run, its fix
// turned off (blas_core_fix_test.cc has it on), names that core in its device description,
// with the reason it runs below this CPU.
TEST(BlasKernelTest, TrainerRunNamesTheCoreItsOpenBlasChose) {
  if (!DescribeThisBlas().library.starts_with("OpenBLAS")) {
    GTEST_SKIP() << "this build's LibTorch does not multiply with OpenBLAS";
  }
  testing::TempDir dir;
  testing::TinyGptYamlOptions options;
  options.updates = 5;
  options.eval_interval = 5;
  options.checkpoint_interval = 5;
  options.fix_blas_core = false;
  testing::ChildProcess child({"/usr/bin/env", "OPENBLAS_CORETYPE=Prescott", TRAINER_RUN_PATH,
                               "--config", dir.Write("job.yaml", testing::TinyGptYaml(options)),
                               "--device-info"});
  const std::vector<std::string> lines = child.ReadAllLines();
  ASSERT_EQ(child.ExitCode(), 0);
  ASSERT_EQ(lines.size(), 1u);
  const nlohmann::json device = nlohmann::json::parse(lines[0])["device_info"];
  EXPECT_EQ(device["blas_core"], "Prescott") << device.dump();
  EXPECT_TRUE(device["blas"].get<std::string>().starts_with("OpenBLAS")) << device.dump();
  EXPECT_EQ(device["isa"], ThisCpuIsa().Description());
  if (ThisCpuIsa().level <= IsaLevel::kSse) return;  // Prescott's SSE3 serves such a CPU
  EXPECT_NE(device["blas_below_cpu"].get<std::string>().find("chose its Prescott kernels"),
            std::string::npos)
      << device.dump();
  // Training says so too, as a warning after its start event; and its finish event puts the
  // measured fp32 peak beside the instruction set's roof, which SSE3 kernels cannot reach a
  // quarter of on an AVX2 or AVX-512 CPU: flagged, with the kernels as the reason.
  testing::ChildProcess run({"/usr/bin/env", "OPENBLAS_CORETYPE=Prescott", TRAINER_RUN_PATH,
                             "--config", dir.File("job.yaml"), "--json", "--output-dir",
                             dir.File("out")});
  int warnings = 0;
  std::string below_isa;
  nlohmann::json finish;
  for (const std::string& line : run.ReadAllLines()) {
    const nlohmann::json event = nlohmann::json::parse(line);
    if (event["event"] == "warning" && event["kind"] == "blas_below_cpu") {
      EXPECT_EQ(event["message"], device["blas_below_cpu"]);
      ++warnings;
    }
    if (event["event"] == "warning" && event["kind"] == "peak_below_isa")
      below_isa = event["message"];
    if (event["event"] == "finish") finish = event;
  }
  EXPECT_EQ(run.ExitCode(), 0);
  EXPECT_EQ(warnings, 1);
  EXPECT_GT(finish.value("isa_peak_flops_per_second", 0.0),
            2 * finish.value("peak_flops_per_second", 0.0))
      << finish.dump();
  EXPECT_NE(finish.value("isa_peak_method", "").find("1 thread x "), std::string::npos)
      << finish.dump();
  EXPECT_TRUE(below_isa.starts_with("the measured fp32 peak of matrix products, ")) << below_isa;
  EXPECT_NE(below_isa.find(device["blas_below_cpu"].get<std::string>()), std::string::npos)
      << below_isa;
}

}  // namespace
}  // namespace trainerd
