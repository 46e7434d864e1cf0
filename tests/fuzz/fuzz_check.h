// What the harnesses share: a failed expectation about the code under test aborts with a
// message, which libFuzzer reports as a crash and saves the input.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

namespace trainerd::fuzz {

// Aborts with `what` when `condition` is false: an invariant of the API under test broke.
inline void Expect(bool condition, const std::string& what) {
  if (condition) return;
  std::fprintf(stderr, "fuzz invariant broken: %s\n", what.c_str());
  std::abort();
}

}  // namespace trainerd::fuzz
