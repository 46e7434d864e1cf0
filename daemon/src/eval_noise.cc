#include "trainerd/daemon/eval_noise.h"

#include <cmath>
#include <cstddef>
#include <nlohmann/json.hpp>

namespace trainerd::daemon {

std::optional<WindowLosses> ParseWindowLosses(const std::string& json) {
  if (json.empty()) return std::nullopt;
  const nlohmann::json parsed = nlohmann::json::parse(json, nullptr, false);
  if (!parsed.is_object()) return std::nullopt;
  std::vector<std::string> mistyped;
  WindowLosses windows = Parse<WindowLosses>(parsed, &mistyped);
  if (!mistyped.empty() || windows.sums.size() != windows.terms.size()) return std::nullopt;
  return windows;
}

std::optional<double> StandardError(const WindowLosses& windows) {
  double sum = 0;
  double terms = 0;
  double holding = 0;  // windows that hold terms
  for (std::size_t w = 0; w < windows.sums.size(); ++w) {
    sum += windows.sums[w];
    terms += static_cast<double>(windows.terms[w]);
    holding += windows.terms[w] > 0 ? 1 : 0;
  }
  if (holding < 2 || !std::isfinite(sum)) return std::nullopt;
  const double loss = sum / terms;
  double squares = 0;
  for (std::size_t w = 0; w < windows.sums.size(); ++w) {
    if (windows.terms[w] == 0) continue;
    const double residual = windows.sums[w] - loss * static_cast<double>(windows.terms[w]);
    squares += residual * residual;
  }
  return std::sqrt(holding / (holding - 1) * squares) / terms;
}

std::optional<double> StoredStandardError(const std::string& windows_json) {
  const std::optional<WindowLosses> windows = ParseWindowLosses(windows_json);
  return windows ? StandardError(*windows) : std::nullopt;
}

std::optional<DifferenceNoise> DifferenceStandardError(const WindowLosses& a, const WindowLosses& b,
                                                       double scale, bool same_windows) {
  if (same_windows && a.terms == b.terms) {
    WindowLosses differences{a.sums, a.terms};
    for (std::size_t w = 0; w < differences.sums.size(); ++w) {
      differences.sums[w] -= scale * b.sums[w];
    }
    const std::optional<double> se = StandardError(differences);
    if (!se) return std::nullopt;
    return DifferenceNoise{*se, true};
  }
  const std::optional<double> se_a = StandardError(a);
  const std::optional<double> se_b = StandardError(b);
  if (!se_a || !se_b) return std::nullopt;
  return DifferenceNoise{std::hypot(*se_a, scale * *se_b), false};
}

double NormalQuantile(double confidence) {
  // Bisection on the normal CDF, 0.5 * erfc(-z / sqrt(2)): 60 halvings of [0, 10] leave less
  // than 1e-17 of z, below a double's resolution.
  double low = 0;
  double high = 10;
  for (int i = 0; i < 60; ++i) {
    const double mid = (low + high) / 2;
    (0.5 * std::erfc(-mid / std::sqrt(2.0)) < confidence ? low : high) = mid;
  }
  return (low + high) / 2;
}

}  // namespace trainerd::daemon
