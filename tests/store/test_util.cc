#include "test_util.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace trainerd::store::testing {

::testing::AssertionResult IsOk(const Status& status) {
  if (status.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << status.message();
}

TempDir::TempDir() {
  std::string pattern = ::testing::TempDir() + "trainerd_store_XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed: " << pattern;
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code error;
  std::filesystem::remove_all(path_, error);
}

std::string TempDir::File(std::string_view name) const { return path_ + "/" + std::string(name); }

std::string ReadBytes(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  EXPECT_TRUE(file.good()) << "cannot read " << path;
  std::ostringstream bytes;
  bytes << file.rdbuf();
  return bytes.str();
}

void WriteBytes(const std::string& path, std::string_view bytes) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  EXPECT_TRUE(file.good()) << "cannot write " << path;
}

RawDb::RawDb(const std::string& path) {
  EXPECT_EQ(sqlite3_open(path.c_str(), &db_), SQLITE_OK) << sqlite3_errmsg(db_);
}

RawDb::~RawDb() { sqlite3_close(db_); }

void RawDb::Exec(const std::string& sql) {
  EXPECT_EQ(sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK)
      << sqlite3_errmsg(db_) << " in " << sql;
}

std::string RawDb::Query(const std::string& sql) {
  std::string text;
  auto append_row = [](void* out, int columns, char** values, char**) {
    auto& result = *static_cast<std::string*>(out);
    if (!result.empty()) result += '\n';
    for (int i = 0; i < columns; ++i) {
      if (i > 0) result += '|';
      result += values[i] == nullptr ? "NULL" : values[i];
    }
    return 0;
  };
  EXPECT_EQ(sqlite3_exec(db_, sql.c_str(), append_row, &text, nullptr), SQLITE_OK)
      << sqlite3_errmsg(db_) << " in " << sql;
  return text;
}

HardwareFingerprint SampleHardware() {
  return {"Test CPU",         16, std::int64_t{128} << 30, "Test GPU", std::int64_t{80} << 30,
          "AVX-512 with bf16"};
}

RunRecord SampleRun(const std::string& config_hash) {
  RunRecord run;
  run.config_hash = config_hash;
  run.created_at = 1'700'000'000.25;
  run.deadline_at = 1'700'021'600.0;
  run.plan = {/*microbatch=*/4, /*accumulation_steps=*/8, /*checkpoint_blocks=*/{0, 2, 5},
              /*precision=*/Precision::kBf16};
  run.hardware = SampleHardware();
  run.software = {"0.1.0", "2.1.0", "OpenBLAS 0.3.21", "GCC 12.2.0"};
  run.shapes_json = R"({"sequence_length":128,"hidden":256})";
  run.seeds_json = R"({"init":1,"data":2})";
  run.data_fingerprint = "sha256:data";
  return run;
}

RunRecord FinishedRun(RunRecord run, RunStatus status) {
  run.status = status;
  run.started_at = run.created_at + 1;
  run.ended_at = run.created_at + 3600;
  run.throughput_method = "device-synchronized, 5 warm-up updates excluded";
  run.peak_memory = MemoryByCategory{
      /*parameters=*/1000,      /*gradients=*/1000,
      /*optimizer_state=*/2000, /*activations=*/8000,
      /*temporaries=*/512,      /*inputs=*/64,        /*peak=*/12345};
  run.samples_per_second = 250.5;
  run.tokens_per_second = 32064.0;
  run.mfu = 0.41;
  run.cost_per_sample = 0.0002;
  run.final_loss = 1.125;
  run.parity_seconds = 4.75;
  return run;
}

UpdateMetric SampleMetric(std::int64_t update) {
  const double x = static_cast<double>(update);
  return {update, 3.0 / (1.0 + x), 1e-3 * (1.0 + x), 0.5 + x, 200.0 + x, std::int64_t{1} << 30};
}

}  // namespace trainerd::store::testing
