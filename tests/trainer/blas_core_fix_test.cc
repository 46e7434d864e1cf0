// The worker's fix for an OpenBLAS that chose kernels below the CPU (blas_core_fix.h): which
// core it forces for a fake CPU and a fake core, the product check that must pass first (and
// the wrong products it rejects), its judgement of the check's child (a child that dies, one
// on other kernels, one with a wrong product), and real trainer-runs whose OpenBLAS was made to
// choose Prescott: restarted on the CPU's core, left alone with runtime.fix_blas_core: false, and
// kept on Prescott when the forced core's check dies (a fake AVX-512 CPU description).
#include "trainerd/trainer/device/blas_core_fix.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "../support/child_process.h"
#include "../support/temp_dir.h"
#include "../support/tiny_job.h"

namespace trainerd {
namespace {

const BlasKernel kPrescott{"OpenBLAS 0.3.21", "Prescott"};

TEST(BlasCoreFixTest, TheCoreForcedIsTheCpusWhereTheChosenOneIsNarrower) {
  EXPECT_EQ(CoreToForce(kPrescott, ParseCpuIsa("sse2 avx fma avx2 avx512f")), "SkylakeX");
  EXPECT_EQ(CoreToForce(kPrescott, ParseCpuIsa("sse2 avx fma avx2")), "Haswell");
  EXPECT_EQ(CoreToForce(kPrescott, ParseCpuIsa("sse2 avx")), "Sandybridge");
  EXPECT_FALSE(CoreToForce(kPrescott, ParseCpuIsa("sse2")).has_value());
  EXPECT_FALSE(CoreToForce({"OpenBLAS 0.3.21", "Zen"}, ParseCpuIsa("sse2 avx fma avx2")));
  EXPECT_FALSE(CoreToForce({"MKL 2024.2", "unknown"}, ParseCpuIsa("avx512f")).has_value());
}

TEST(BlasCoreFixTest, TheBlasProductPassesItsCheckAndIsTimed) {
  const BlasProductCheck check = CheckBlasProduct();
  EXPECT_TRUE(check.ok()) << check.max_error;
  EXPECT_LT(check.max_error, 1e-6);
  EXPECT_GT(check.gflops, 0);
  EXPECT_EQ(check.blas.library, DescribeThisBlas().library);
}

// Kernels that compute something else are refused: one element off by 0.05 (about 5e-4 of its
// scale), and a product in bf16 (a kernel of lower precision than fp32).
TEST(BlasCoreFixTest, AWrongOrLessPreciseProductFailsItsCheck) {
  const BlasProductCheck one_off =
      CheckBlasProduct([](const torch::Tensor& a, const torch::Tensor& b) {
        torch::Tensor c = torch::mm(a, b);
        c[3][5] += 0.05;
        return c;
      });
  EXPECT_FALSE(one_off.ok()) << one_off.max_error;
  const BlasProductCheck bf16 =
      CheckBlasProduct([](const torch::Tensor& a, const torch::Tensor& b) {
        return torch::mm(a.to(torch::kBFloat16), b.to(torch::kBFloat16)).to(torch::kFloat32);
      });
  EXPECT_FALSE(bf16.ok()) << bf16.max_error;
}

TEST(BlasCoreFixTest, TheCheckReadsBackWhatItPrinted) {
  BlasProductCheck check;
  check.blas = kPrescott;
  check.max_error = 2.5e-7;
  check.gflops = 31.5;
  const std::optional<BlasProductCheck> read =
      ParseBlasProductCheckJson(BlasProductCheckJson(check));
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(read->blas.library, "OpenBLAS 0.3.21");
  EXPECT_EQ(read->blas.core, "Prescott");
  EXPECT_DOUBLE_EQ(read->max_error, 2.5e-7);
  EXPECT_DOUBLE_EQ(read->gflops, 31.5);
  EXPECT_FALSE(ParseBlasProductCheckJson("Illegal instruction").has_value());
  EXPECT_FALSE(ParseBlasProductCheckJson(R"({"blas": "x"})").has_value());
}

// The worker's judgement of its check's child, with real children that stand in for
// `trainer-run --check-blas`: one that dies of SIGILL, one whose OpenBLAS ignored the core
// asked for, one whose product is wrong (it echoes the core it was given), and a missing
// one. Each refusal is returned, recorded for device_info, and the process is not restarted.
TEST(BlasCoreFixTest, AFailedCheckIsRefusedWithWhyAndNothingRestarts) {
  testing::TempDir dir;
  const auto checker = [&](const std::string& name, const std::string& body) {
    // Run as anything but the check, the script is the restart the refusal must not do: the
    // test process, replaced by it, then fails.
    const std::string path =
        dir.Write(name,
                  "#!/bin/sh\n[ \"$1\" = --check-blas ] || { echo \"$0 restarted the test\" >&2; "
                  "exit 99; }\n" +
                      body + "\n");
    std::filesystem::permissions(path, std::filesystem::perms::owner_all);
    return path;
  };
  const CpuIsa avx512 = ParseCpuIsa("sse2 avx fma avx2 avx512f");
  const auto refusal = [&](const std::string& self) {
    ::unsetenv("TRAINERD_BLAS_CORE_FIX");
    const std::optional<std::string> why =
        FixBlasCore(self, {"trainer-run", "--config", "job.yaml"}, kPrescott, avx512);
    EXPECT_EQ(BlasCoreFixRecord(), why) << "the refusal is the record";
    EXPECT_FALSE(FixBlasCore(self, {"trainer-run"}, kPrescott, avx512)) << "tried once only";
    ::unsetenv("TRAINERD_BLAS_CORE_FIX");
    return why.value_or("");
  };
  const std::string head =
      "OPENBLAS_CORETYPE=SkylakeX was not used (kept Prescott): its check, "
      "`trainer-run --check-blas` with it set, ";
  EXPECT_EQ(refusal(checker("sigill.sh", "kill -ILL $$")),
            head + "was killed by signal 4 (Illegal instruction)");
  EXPECT_EQ(refusal(checker("ignored.sh", R"(echo '{"blas_core": "Prescott", "max_error": 1e-7, )"
                                          R"("gflops_one_thread": 30}')")),
            head + "found OpenBLAS on its Prescott kernels");
  EXPECT_EQ(refusal(checker("wrong.sh", R"(echo "{\"blas_core\": \"$OPENBLAS_CORETYPE\", )"
                                        R"(\"max_error\": 0.3, \"gflops_one_thread\": 90}")")),
            head + "multiplied 0.3 away from the float64 reference (tolerance 1e-05)");
  EXPECT_EQ(refusal(checker("silent.sh", "exit 3")), head + "printed no result (exit 3)");
  EXPECT_EQ(refusal(dir.File("missing")).rfind(head + "could not start: ", 0), 0u);
  ::unsetenv("TRAINERD_BLAS_CORE_FIX");
  EXPECT_FALSE(FixBlasCore(checker("unused.sh", "kill -ILL $$"), {"trainer-run"},
                           {"OpenBLAS 0.3.21", "SkylakeX"}, avx512))
      << "nothing to do for kernels as wide as the CPU";
}

class BlasCoreFixRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!DescribeThisBlas().library.starts_with("OpenBLAS")) {
      GTEST_SKIP() << "this build's LibTorch does not multiply with OpenBLAS";
    }
    if (ThisCpuIsa().level < IsaLevel::kAvx2) GTEST_SKIP() << "Prescott serves this CPU";
  }

  // trainer-run --device-info with OpenBLAS started on Prescott; `env` adds variables.
  nlohmann::json DeviceInfo(bool fix, const std::vector<std::string>& env = {}) {
    testing::TinyGptYamlOptions options;
    options.fix_blas_core = fix;
    std::vector<std::string> argv = {"/usr/bin/env", "OPENBLAS_CORETYPE=Prescott"};
    argv.insert(argv.end(), env.begin(), env.end());
    argv.insert(argv.end(),
                {TRAINER_RUN_PATH, "--config",
                 dir_.Write("job.yaml", testing::TinyGptYaml(options)), "--device-info"});
    testing::ChildProcess child(argv);
    const std::vector<std::string> lines = child.ReadAllLines();
    stderr_ = child.ReadAllStderr();
    EXPECT_EQ(child.ExitCode(), 0) << stderr_;
    if (lines.size() != 1) return {};
    return nlohmann::json::parse(lines[0])["device_info"];
  }

  testing::TempDir dir_;
  std::string stderr_;
};

// The worker restarts on the core that serves this CPU; its record names both cores and
// the product check's figures.
TEST_F(BlasCoreFixRunTest, AWorkerOnPrescottRestartsOnTheCpusCore) {
  const std::string core = CoreServing(ThisCpuIsa().level);
  const nlohmann::json device = DeviceInfo(/*fix=*/true);
  EXPECT_EQ(device["blas_core"], core) << device.dump();
  EXPECT_FALSE(device.contains("blas_below_cpu")) << device.dump();
  const std::string record = device.value("blas_core_fix", "");
  EXPECT_TRUE(record.starts_with("OPENBLAS_CORETYPE=" + core +
                                 " in place of Prescott: its product "
                                 "matched float64 within "))
      << record;
  EXPECT_NE(record.find("GFLOP/s on Prescott"), std::string::npos) << record;
}

TEST_F(BlasCoreFixRunTest, WithTheFixOffTheWorkerKeepsPrescottAndSaysWhy) {
  const nlohmann::json device = DeviceInfo(/*fix=*/false);
  EXPECT_EQ(device["blas_core"], "Prescott") << device.dump();
  EXPECT_FALSE(device.contains("blas_core_fix")) << device.dump();
  EXPECT_NE(device.value("blas_below_cpu", "").find("chose its Prescott kernels"),
            std::string::npos)
      << device.dump();
}

// A CPU described as AVX-512 that is not: SkylakeX's kernels die of SIGILL in the check's
// child, and the worker carries on, on Prescott, with the reason on stderr and in its record.
TEST_F(BlasCoreFixRunTest, ACoreWhoseCheckDiesIsNotUsed) {
  if (ThisCpuIsa().level == IsaLevel::kAvx512) GTEST_SKIP() << "SkylakeX's kernels run here";
  const nlohmann::json device = DeviceInfo(
      /*fix=*/true, {"TRAINERD_TEST_ONLY_CPU_FLAGS=sse2 avx fma avx2 avx512f avx512bw avx512vl"});
  EXPECT_EQ(device["blas_core"], "Prescott") << device.dump();
  const std::string record = device.value("blas_core_fix", "");
  EXPECT_TRUE(
      record.starts_with("OPENBLAS_CORETYPE=SkylakeX was not used (kept Prescott): its "
                         "check, `trainer-run --check-blas` with it set, was killed by "
                         "signal 4"))
      << record;
  EXPECT_NE(stderr_.find("warning: " + record), std::string::npos) << stderr_;
}

// Training records the fix in its start event, and trains.
TEST_F(BlasCoreFixRunTest, TheStartEventOfARestartedRunRecordsTheFix) {
  testing::ChildProcess run({"/usr/bin/env", "OPENBLAS_CORETYPE=Prescott", TRAINER_RUN_PATH,
                             "--config", dir_.Write("job.yaml", testing::TinyGptYaml(3)), "--json",
                             "--output-dir", dir_.File("out")});
  nlohmann::json start;
  for (const std::string& line : run.ReadAllLines()) {
    const nlohmann::json event = nlohmann::json::parse(line);
    if (event["event"] == "start") start = event;
    EXPECT_NE(event.value("kind", ""), "blas_below_cpu") << line;
  }
  EXPECT_EQ(run.ExitCode(), 0);
  EXPECT_EQ(start["device_info"]["blas_core"], CoreServing(ThisCpuIsa().level)) << start.dump();
  EXPECT_TRUE(start["device_info"].contains("blas_core_fix")) << start.dump();
}

}  // namespace
}  // namespace trainerd
