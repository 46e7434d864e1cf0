#include "trainerd/daemon/host_fingerprint.h"

#include <gtest/gtest.h>

#include "trainerd/common/cpu_isa.h"

namespace trainerd::daemon {
namespace {

TEST(HostFingerprintTest, TheCpuDeviceHasTheHostsMemory) {
  const store::HardwareFingerprint hw = HostHardware("cpu");
  EXPECT_EQ(hw.device, "cpu");
  EXPECT_GT(hw.memory_bytes, 1LL << 30);
  EXPECT_EQ(hw.device_memory_bytes, hw.memory_bytes);
  EXPECT_GT(hw.cpu_cores, 0);
  EXPECT_EQ(hw.isa, ThisCpuIsa().Description());
  EXPECT_NE(hw.isa, "unknown");
}

// What `trainer-run --device-info` prints on a GPU machine (its shape; the values are an
// example, not a measurement).
TEST(HostFingerprintTest, AGpuIsNamedAndSizedFromTheWorkersDeviceReport) {
  store::HardwareFingerprint hw = HostHardware("cuda");
  EXPECT_EQ(hw.device_memory_bytes, 0);  // the daemon alone cannot see the GPU
  const nlohmann::json report = {{"device_info",
                                  {{"type", "cuda"},
                                   {"name", "NVIDIA H200"},
                                   {"total_memory_bytes", 150754820096},
                                   {"compute_capability", "9.0"},
                                   {"driver_version", "13.0"},
                                   {"runtime_version", "13.0"}}}};
  ASSERT_TRUE(ApplyDeviceDescription(report, &hw));
  EXPECT_EQ(hw.device, "NVIDIA H200");
  EXPECT_EQ(hw.device_memory_bytes, 150754820096);
}

TEST(HostFingerprintTest, AReportWithoutNameOrMemoryChangesNothing) {
  const store::HardwareFingerprint before = HostHardware("cuda");
  for (const nlohmann::json& report :
       {nlohmann::json(nullptr), nlohmann::json{{"device_info", "gpu"}},
        nlohmann::json{{"device_info", {{"name", "NVIDIA H200"}}}},
        nlohmann::json{{"device_info", {{"total_memory_bytes", 1}}}},
        nlohmann::json{{"device_info", {{"name", 7}, {"total_memory_bytes", 1}}}}}) {
    store::HardwareFingerprint hw = before;
    EXPECT_FALSE(ApplyDeviceDescription(report, &hw)) << report.dump();
    EXPECT_EQ(hw, before) << report.dump();
  }
}

}  // namespace
}  // namespace trainerd::daemon
