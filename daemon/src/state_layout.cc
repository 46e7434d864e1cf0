#include "trainerd/daemon/state_layout.h"

#include <filesystem>
#include <iterator>

namespace trainerd::daemon {

std::string StateLayout::ConfigCopy(const std::string& config_hash) const {
  return dir_ + "/configs/" + config_hash + ".yaml";
}

std::string StateLayout::WorkDir() const { return dir_ + "/work"; }

std::string StateLayout::PlanFile() const { return WorkDir() + "/plan.json"; }

std::string StateLayout::RunLog(std::int64_t run_id) const {
  return dir_ + "/logs/run-" + std::to_string(run_id) + ".log";
}

std::string StateLayout::DeviceInfoLog() const { return dir_ + "/logs/device-info.log"; }

std::string StateLayout::ProfileTrace(std::int64_t run_id) const {
  return dir_ + "/profiles/run-" + std::to_string(run_id) + ".trace.json";
}

std::string StateLayout::DataProfile(const std::string& data_fingerprint) const {
  return dir_ + "/data/" + data_fingerprint + ".json";
}

std::string StateLayout::RunReport(std::int64_t run_id) const {
  return dir_ + "/reports/run-" + std::to_string(run_id) + ".html";
}

std::string StateLayout::ReleaseDir(std::int64_t run_id, const std::string& sha256,
                                    bool released) const {
  return dir_ + (released ? "/releases/" : "/releases/rejected/") + "run-" +
         std::to_string(run_id) + "-" + sha256.substr(0, 12);
}

std::string StateLayout::CurrentReleaseLink() const { return dir_ + "/releases/current"; }

std::string StateLayout::WorkerPidFile() const { return dir_ + "/worker.pid"; }

std::string StateLayout::LockFile() const { return dir_ + "/trainerd.lock"; }

bool StateLayout::Holds(const std::string& path) const {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path base = fs::absolute(dir_, ec).lexically_normal();
  if (ec) return false;
  const fs::path target = fs::absolute(path, ec).lexically_normal();
  if (ec) return false;
  const fs::path relative = target.lexically_relative(base);
  if (relative.empty() || relative == "." || *relative.begin() == "..") return false;
  fs::path folder = base;
  for (auto part = relative.begin(); std::next(part) != relative.end(); ++part) {
    folder /= *part;
    if (fs::is_symlink(fs::symlink_status(folder, ec))) return false;
  }
  return true;
}

Status StateLayout::CreateDirectories() const {
  namespace fs = std::filesystem;
  for (const char* sub : {"", "/configs", "/work", "/releases", "/releases/rejected", "/logs",
                          "/reports", "/profiles", "/data"}) {
    const std::string path = dir_ + sub;
    std::error_code ec;
    fs::create_directories(path, ec);
    if (ec) return Status::IOError(path + ": cannot create state directory: " + ec.message());
    fs::permissions(path, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec, ec);
  }
  return Status::Ok();
}

}  // namespace trainerd::daemon
