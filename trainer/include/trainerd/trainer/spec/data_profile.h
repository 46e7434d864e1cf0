// What the training split of a dataset looks like (data/dataset.h, Dataset::profile): learned
// in the pass that hashes its files and cached with their digests, so a night costs nothing
// more. trainer-run --data-profile reports it (spec/worker_protocol.h); the daemon compares
// it with the current release's data (docs/data-quality.md). Torch-free.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace trainerd {

struct ColumnSummary {
  double mean = 0;
  double spread = 0;  // standard deviation
};
inline constexpr std::int64_t kMaxProfiledColumns = 256;
inline constexpr std::int64_t kMaxCountedIds = std::int64_t{1} << 22;

// tokens with data.document_end: the training split's documents, their lengths in ids (the end
// id included; the file's last document may lack it), and what padding costs.
struct DocumentProfile {
  std::int64_t count = 0;
  std::int64_t median_length = 0;
  std::int64_t longest = 0;
  // The share of the training windows' input positions that are padding: 0 packed, and with
  // data.packing: false what the documents shorter than a window leave empty.
  double padding_share = 0;
};

struct DataProfile {
  // Token ids (tokens), bytes (text) or rows (tensors) of the training split.
  std::int64_t train_samples = 0;
  // Each id's count in the training split (tokens, text), or each class's among integer
  // targets (tensors); ids from kMaxCountedIds on are counted in the last bin.
  std::vector<std::int64_t> id_counts;
  // tokens with data.loss_masks: the training targets the mask learns, of train_samples - 1
  // (the first id is no target); none without masks.
  std::optional<std::int64_t> learned_targets;
  std::optional<DocumentProfile> documents;
  // tensors: training rows whose floating-point inputs hold a NaN or an infinity, plus those
  // whose floating-point targets do, and the floating-point inputs' first kMaxProfiledColumns
  // columns (a row flattened).
  std::int64_t rows_not_finite = 0;
  std::vector<ColumnSummary> columns;
};

}  // namespace trainerd
