// How much longer than usual the tests may wait for real processes: TRAINERD_TEST_TIME_SCALE
// (a positive number, default 1). scripts/test-sanitized.sh sets it, since ASan and UBSan
// make the trainer several times slower; tests never assert durations, only give up later.
#pragma once

#include <cstdlib>

namespace trainerd::testing {

inline double TimeScale() {
  const char* text = std::getenv("TRAINERD_TEST_TIME_SCALE");
  if (text == nullptr) return 1;
  const double scale = std::strtod(text, nullptr);
  return scale > 0 ? scale : 1;
}

}  // namespace trainerd::testing
