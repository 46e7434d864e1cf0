// What the benchmark drivers share: integer "--name value" flags, comma-separated lists and
// the median of their timings.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace bench {

inline double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

inline std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream stream(text);
  for (std::string item; std::getline(stream, item, ',');) items.push_back(item);
  return items;
}

// Sets the integers `flags` names from "--name value" pairs. On a flag it does not name it says
// so, naming `program`, and returns false.
inline bool ParseIntegerFlags(int argc, char** argv, const char* program,
                              const std::map<std::string, std::int64_t*>& flags) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const auto flag = flags.find(argv[i]);
    if (flag == flags.end()) {
      std::cerr << program << ": unknown flag " << argv[i] << "\n";
      return false;
    }
    *flag->second = std::atoll(argv[i + 1]);
  }
  return true;
}

}  // namespace bench
