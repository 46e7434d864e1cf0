// What the harnesses share: a failed expectation about the code under test aborts with a
// message, which libFuzzer reports as a crash and saves the input.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#include "trainerd/common/status.h"

namespace trainerd::fuzz {

// Aborts with `what` when `condition` is false: an invariant of the API under test broke.
inline void Expect(bool condition, const std::string& what) {
  if (condition) return;
  std::fprintf(stderr, "fuzz invariant broken: %s\n", what.c_str());
  std::abort();
}

// The value of `result`; aborts naming `what` when there is none (a fixture that cannot be
// set up is no finding about the code under test, but it must not go unnoticed).
template <typename T>
T Must(Result<T> result, const char* what) {
  Expect(result.ok(), std::string(what) + ": " + result.status().message());
  return std::move(result).value();
}
inline void Must(const Status& status, const char* what) {
  Expect(status.ok(), std::string(what) + ": " + status.message());
}

}  // namespace trainerd::fuzz
