// Helpers shared by the run store tests: a temporary directory, raw file and SQLite access
// for building fixtures and inspecting files, and sample records.
#pragma once

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <string>
#include <string_view>

#include "trainerd/common/status.h"
#include "trainerd/store/records.h"

namespace trainerd::store::testing {

// ASSERT_TRUE(IsOk(call())) prints the error message when the call failed.
::testing::AssertionResult IsOk(const Status& status);
template <typename T>
::testing::AssertionResult IsOk(const Result<T>& result) {
  return IsOk(result.status());
}

// A fresh directory under the test temp dir, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // The path of `name` inside the directory.
  std::string File(std::string_view name) const;

 private:
  std::string path_;
};

// Every byte of a file; fails the test when it cannot be read.
std::string ReadBytes(const std::string& path);
void WriteBytes(const std::string& path, std::string_view bytes);

// A plain SQLite connection, bypassing the store: builds fixtures and inspects files.
class RawDb {
 public:
  explicit RawDb(const std::string& path);
  ~RawDb();
  RawDb(const RawDb&) = delete;
  RawDb& operator=(const RawDb&) = delete;

  // Runs a script; fails the test on error.
  void Exec(const std::string& sql);
  // Every row of `sql`, columns joined by '|', rows by '\n'; fails the test on error.
  std::string Query(const std::string& sql);

 private:
  sqlite3* db_ = nullptr;
};

HardwareFingerprint SampleHardware();
// A scheduled run of `config_hash` with every field known before a run starts set.
RunRecord SampleRun(const std::string& config_hash);
// `run` finished with `status` and every measured field set.
RunRecord FinishedRun(RunRecord run, RunStatus status);
UpdateMetric SampleMetric(std::int64_t update);

}  // namespace trainerd::store::testing
