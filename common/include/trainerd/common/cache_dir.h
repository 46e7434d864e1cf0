// trainerd's per-user cache folder: $XDG_CACHE_HOME/trainerd, else ~/.cache/trainerd, else
// /tmp/trainerd. Holds measurements that are expensive and keyed by what they measured (the
// matmul peak, data file digests); deleting it only costs a re-measurement.
#pragma once

#include <cstdlib>
#include <string>

namespace trainerd {

inline std::string UserCacheDir() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  const std::string base = xdg != nullptr    ? xdg
                           : home != nullptr ? std::string(home) + "/.cache"
                                             : "/tmp";
  return base + "/trainerd";
}

}  // namespace trainerd
