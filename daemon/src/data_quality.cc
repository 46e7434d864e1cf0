#include "trainerd/daemon/data_quality.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "trainerd/common/divergence.h"
#include "trainerd/daemon/json_text.h"

namespace trainerd::daemon {
namespace {

// A reference column of no spread measures a shift in units of this.
constexpr double kLeastSpread = 1e-6;

std::string Figure(const char* format, double value) {
  char buffer[96];
  std::snprintf(buffer, sizeof buffer, format, value);
  return buffer;
}

// The share of a profile's training targets its loss masks learn; none without masks.
std::optional<double> LearnedShare(const DataProfile& p) {
  if (!p.learned_targets || p.train_samples < 2) return std::nullopt;
  return static_cast<double>(*p.learned_targets) / static_cast<double>(p.train_samples - 1);
}

}  // namespace

DataQualityFigures CompareDataProfiles(const DataProfileReport& tonight,
                                       const std::optional<DataProfileReport>& reference,
                                       std::optional<std::int64_t> reference_run_id,
                                       const DataQualityConfig& config) {
  DataQualityFigures f;
  const DataProfile& p = tonight.profile;
  f.data_fingerprint = tonight.data_fingerprint;
  f.train_samples = p.train_samples;
  f.vocabulary = tonight.vocabulary;
  const std::int64_t ids = std::accumulate(p.id_counts.begin(), p.id_counts.end(), std::int64_t{0});
  if (ids > 0) {
    f.beyond_vocabulary =
        static_cast<double>(tonight.ids_beyond_vocabulary) / static_cast<double>(ids);
  }
  f.learned_share = LearnedShare(p);
  const bool rows = !p.columns.empty() || p.rows_not_finite > 0;
  if (rows && p.train_samples > 0) {
    f.not_finite_rows = std::min(
        1.0, static_cast<double>(p.rows_not_finite) / static_cast<double>(p.train_samples));
  }
  if (f.beyond_vocabulary > config.max_beyond_vocabulary) {
    f.breaches.push_back(
        Figure("%.4g%% of the training ids", 100 * f.beyond_vocabulary) +
        " are at or beyond the model's vocabulary of " + std::to_string(f.vocabulary) +
        Figure(" (data_quality.max_beyond_vocabulary %.4g%%)", 100 * config.max_beyond_vocabulary));
  }
  if (f.not_finite_rows > config.max_not_finite_rows) {
    f.breaches.push_back(
        Figure("%.4g%% of the training rows hold NaN or Inf", 100 * f.not_finite_rows) +
        Figure(" (data_quality.max_not_finite_rows %.4g%%)", 100 * config.max_not_finite_rows));
  }
  if (reference) {
    const DataProfile& r = reference->profile;
    f.reference_fingerprint = reference->data_fingerprint;
    f.reference_run_id = reference_run_id;
    if (r.train_samples > 0) {
      f.size_ratio = static_cast<double>(p.train_samples) / static_cast<double>(r.train_samples);
      if (*f.size_ratio < config.min_size_ratio) {
        f.breaches.push_back(
            "the training data holds " + std::to_string(p.train_samples) + " samples, " +
            Figure("%.3g", *f.size_ratio) + " of the current release's " +
            std::to_string(r.train_samples) +
            Figure(" (data_quality.min_size_ratio %.4g%%)", 100 * config.min_size_ratio));
      }
    }
    f.id_divergence = JensenShannonBits(p.id_counts, r.id_counts);
    if (f.id_divergence && *f.id_divergence > config.max_id_divergence) {
      f.breaches.push_back(
          Figure("the ids' distribution moved %.4f bits", *f.id_divergence) +
          " (Jensen-Shannon) from the current release's data" +
          Figure(" (data_quality.max_id_divergence %.4g)", config.max_id_divergence));
    }
    const std::size_t columns = std::min(p.columns.size(), r.columns.size());
    for (std::size_t c = 0; c < columns; ++c) {
      const double shift = std::abs(p.columns[c].mean - r.columns[c].mean) /
                           std::max(r.columns[c].spread, kLeastSpread);
      if (!f.column_shift || shift > *f.column_shift) {
        f.column_shift = shift;
        f.shifted_column = static_cast<std::int64_t>(c);
      }
    }
    const std::optional<double> reference_share = LearnedShare(r);
    if (f.learned_share && reference_share) {
      f.learned_share_shift = std::abs(*f.learned_share - *reference_share);
      if (*f.learned_share_shift > config.max_learned_share_shift) {
        f.breaches.push_back(
            Figure("the loss masks learn %.4g%% of the training targets", 100 * *f.learned_share) +
            Figure(", the current release's data's %.4g%%", 100 * *reference_share) +
            Figure(" (data_quality.max_learned_share_shift %.4g%%)",
                   100 * config.max_learned_share_shift));
      }
    }
    if (f.column_shift && *f.column_shift > config.max_column_shift) {
      f.breaches.push_back(
          "input column " + std::to_string(*f.shifted_column) +
          Figure("'s mean moved %.3g of the current release's spread", *f.column_shift) +
          Figure(" (data_quality.max_column_shift %.4g)", config.max_column_shift));
    }
  }
  return f;
}

nlohmann::json DataQualityFigures::ToJson() const {
  return {{"pass", pass()},
          {"data_fingerprint", data_fingerprint},
          {"train_samples", train_samples},
          {"reference_fingerprint", reference_fingerprint ? nlohmann::json(*reference_fingerprint)
                                                          : nlohmann::json(nullptr)},
          {"reference_run_id",
           reference_run_id ? nlohmann::json(*reference_run_id) : nlohmann::json(nullptr)},
          {"size_ratio", FigureJson(size_ratio)},
          {"id_divergence", FigureJson(id_divergence)},
          {"column_shift", FigureJson(column_shift)},
          {"shifted_column",
           shifted_column ? nlohmann::json(*shifted_column) : nlohmann::json(nullptr)},
          {"vocabulary", vocabulary},
          {"beyond_vocabulary", beyond_vocabulary},
          {"not_finite_rows", not_finite_rows},
          {"learned_share", FigureJson(learned_share)},
          {"learned_share_shift", FigureJson(learned_share_shift)},
          {"breaches", breaches}};
}

std::string DataQualityFigures::Summary() const {
  if (!pass()) {
    std::string joined;
    for (const std::string& b : breaches) joined += (joined.empty() ? "" : "; ") + b;
    return joined;
  }
  std::string line = std::to_string(train_samples) + " training samples";
  if (size_ratio) line += Figure(", %.3g of the current release's", *size_ratio);
  if (id_divergence) line += Figure(", ids moved %.4f bits", *id_divergence);
  if (column_shift) line += Figure(", columns moved at most %.3g spreads", *column_shift);
  if (learned_share) line += Figure(", %.3g%% of the targets learned", 100 * *learned_share);
  if (!reference_fingerprint) line += ", no release to compare with";
  return line;
}

}  // namespace trainerd::daemon
