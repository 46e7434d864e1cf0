// The input-quality check (docs/data-quality.md): tonight's training data, as the worker
// profiled it (trainer-run --data-profile), against the data of the current release. Pure:
// the data step (daemon/src/cycle/data_step.cc) runs the worker, keeps the profiles and
// records the figures.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "trainerd/daemon/daemon_config.h"
#include "trainerd/trainer/spec/worker_protocol.h"

namespace trainerd::daemon {

struct DataQualityFigures {
  std::string data_fingerprint;
  std::int64_t train_samples = 0;
  // Against the reference (the current release's data); none without one.
  std::optional<std::string> reference_fingerprint;
  std::optional<std::int64_t> reference_run_id;
  std::optional<double> size_ratio;     // train_samples / the reference's
  std::optional<double> id_divergence;  // Jensen-Shannon, bits; none without ids on both sides
  std::optional<double> column_shift;   // the largest |mean - mean'| / spread' over the columns
  std::optional<std::int64_t> shifted_column;
  // |learned_share - the reference's|, when both data have loss masks
  std::optional<double> learned_share_shift;
  // Of tonight's data alone.
  std::int64_t vocabulary = 0;   // 0: unknown
  double beyond_vocabulary = 0;  // share of training ids
  double not_finite_rows = 0;    // share of training rows (tensors)
  // The share of the training targets the loss masks learn (tokens, data.loss_masks); none
  // without masks.
  std::optional<double> learned_share;
  // A sentence per threshold breached, naming the figure, its value and the threshold.
  std::vector<std::string> breaches;

  bool pass() const { return breaches.empty(); }
  nlohmann::json ToJson() const;  // the run's data_quality, the event's details
  std::string Summary() const;    // one line: the figures, or the breaches
};

// `tonight` against `reference` (the current release's run `reference_run_id` profiled its
// data so), each figure against its threshold in `config`.
DataQualityFigures CompareDataProfiles(const DataProfileReport& tonight,
                                       const std::optional<DataProfileReport>& reference,
                                       std::optional<std::int64_t> reference_run_id,
                                       const DataQualityConfig& config);

}  // namespace trainerd::daemon
