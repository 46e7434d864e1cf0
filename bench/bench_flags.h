// What the benchmark drivers share: "--name value" flags, comma-separated lists and the
// median of their timings.
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

// Sets the integers `integers` names and the strings `strings` names from "--name value"
// pairs. On a flag neither names, or one without its value, it says so, naming `program`,
// and returns false.
inline bool ParseFlags(int argc, char** argv, const char* program,
                       const std::map<std::string, std::int64_t*>& integers,
                       const std::map<std::string, std::string*>& strings = {}) {
  for (int i = 1; i < argc; i += 2) {
    const auto integer = integers.find(argv[i]);
    const auto string = strings.find(argv[i]);
    if (integer == integers.end() && string == strings.end()) {
      std::cerr << program << ": unknown flag " << argv[i] << "\n";
      return false;
    }
    if (i + 1 == argc) {
      std::cerr << program << ": " << argv[i] << " needs a value\n";
      return false;
    }
    if (integer != integers.end()) {
      *integer->second = std::atoll(argv[i + 1]);
    } else {
      *string->second = argv[i + 1];
    }
  }
  return true;
}

}  // namespace bench
