// The median of a list of numbers: the middle one, or the mean of the middle two.
#pragma once

#include <algorithm>
#include <vector>

namespace trainerd {

// REQUIRES: values not empty.
inline double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

}  // namespace trainerd
