#include "trainerd/daemon/status_cache.h"

#include <sys/stat.h>
#include <time.h>

#include "trainerd/daemon/control_queries.h"

namespace trainerd::daemon {

StoredStatusCache::StoredStatusCache(store::Store& store) : store_(store) {}

const nlohmann::json& StoredStatusCache::Answer(const std::string& job_path) {
  const std::optional<Key> key = CurrentKey(job_path);
  if (!key || !key_ || !(*key == *key_)) {
    answer_ = AnswerFromStore(store_, job_path, {{"command", "status"}});
    ++computations_;
    // An error answer is not kept: the next request asks the store again.
    key_ = answer_.value("ok", false) ? key : std::nullopt;
  }
  return answer_;
}

std::optional<StoredStatusCache::Key> StoredStatusCache::CurrentKey(const std::string& job_path) {
  Result<store::Store::ChangeStamp> stamp = store_.CurrentChangeStamp();
  if (!stamp.ok()) return std::nullopt;
  Key key;
  key.stamp = *stamp;
  key.job_path = job_path;
  struct stat st {};
  if (::stat(job_path.c_str(), &st) == 0) {
    key.job_exists = true;
    key.job_device = st.st_dev;
    key.job_inode = st.st_ino;
    key.job_size = st.st_size;
    key.job_mtime_ns = std::int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec;
    timespec now{};
    ::clock_gettime(CLOCK_REALTIME, &now);
    const std::int64_t now_ns = std::int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
    if (static_cast<double>(now_ns - key.job_mtime_ns) < kRacySeconds * 1e9) return std::nullopt;
  }
  return key;
}

}  // namespace trainerd::daemon
