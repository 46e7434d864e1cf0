// Tests that need a CUDA device derive their fixture from CudaTest and put "Cuda" in the
// suite name (scripts/device-check.sh runs `ctest -R Cuda`). They are compiled in every
// build and skip themselves, with the reason, where torch::cuda::is_available() is false:
// on the CPU-only LibTorch 1.13 build and on a CUDA build without a GPU.
#pragma once

#include <gtest/gtest.h>
#include <torch/cuda.h>

namespace trainerd::testing {

// `Base` is the fixture the test would have without a GPU; its SetUp runs after the check.
template <class Base = ::testing::Test>
class CudaTestOf : public Base {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) {
      GTEST_SKIP() << "no CUDA device (torch::cuda::is_available() is false); runs on a GPU "
                      "machine through scripts/device-check.sh";
    }
    Base::SetUp();
  }
  const torch::Device cuda_{torch::kCUDA, 0};
};

using CudaTest = CudaTestOf<>;

}  // namespace trainerd::testing
