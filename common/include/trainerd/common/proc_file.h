// Reading "key: value" files such as /proc/cpuinfo and /proc/meminfo.
#pragma once

#include <string>

namespace trainerd {

// The value after the colon of the first line of `path` that starts with `key`, leading
// blanks removed; "" when the file or the key is missing.
std::string ProcFileValue(const std::string& path, const std::string& key);

}  // namespace trainerd
