#include "trainerd/common/divergence.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace trainerd {

std::optional<double> JensenShannonBits(const std::vector<std::int64_t>& p,
                                        const std::vector<std::int64_t>& q) {
  const double p_total = static_cast<double>(std::accumulate(p.begin(), p.end(), std::int64_t{0}));
  const double q_total = static_cast<double>(std::accumulate(q.begin(), q.end(), std::int64_t{0}));
  if (p_total <= 0 || q_total <= 0) return std::nullopt;
  // Each side's share of log2(x / m) where m is the mixture (x + y) / 2.
  const auto term = [](double x, double m) { return x > 0 ? x * std::log2(x / m) : 0.0; };
  double divergence = 0;
  for (std::size_t i = 0; i < std::max(p.size(), q.size()); ++i) {
    const double a = i < p.size() ? static_cast<double>(p[i]) / p_total : 0;
    const double b = i < q.size() ? static_cast<double>(q[i]) / q_total : 0;
    const double m = (a + b) / 2;
    divergence += (term(a, m) + term(b, m)) / 2;
  }
  return std::clamp(divergence, 0.0, 1.0);  // rounding may leave it a hair outside
}

}  // namespace trainerd
