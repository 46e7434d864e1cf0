// What the trainer, the ledger, the planner and the parity check read: a dataset of
// fixed-size samples with named evaluation slices, in one of the formats of `data.format`
// (text files, flat token-id arrays, or arrays of rows). Sampling is a pure function of (seed,
// sample index): sample i of the job's training stream is the same window whatever the microbatch
// split or wherever a run was resumed, so a plan never changes which samples an update sees.
// Implementations are immutable after loading and thread-safe to read.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "trainerd/common/status.h"
#include "trainerd/trainer/spec/data_profile.h"
#include "trainerd/trainer/spec/job_spec.h"

namespace trainerd {

// One named evaluation slice, and what of its source trains.
struct DataSlice {
  std::string name;                // file name ("GPL-3") or stem of an evaluation file ("val")
  std::string path;                // canonical path
  std::int64_t train_bytes = 0;    // 0 when the slice is held out whole (tokens format)
  std::int64_t holdout_bytes = 0;  // bytes evaluated from
};

// Where the rows of a batch come from in the training stream (sample_dropout.h).
struct SampleStream {
  std::uint64_t seed = 0;
  std::int64_t first_sample = 0;  // stream index of row 0
};

// What a model reads for a run of samples; `targets` holds kMaskedTarget (-100,
// spec/data_format.h) where a loss mask or a document's end leaves a position out.
struct Batch {
  torch::Tensor inputs;
  torch::Tensor targets;
  std::int64_t samples = 0;
  std::optional<SampleStream> stream;  // training samples only; none for held-out ones
  // Packed documents: each input's position in its document, [B, T] int64 on the CPU
  // (semantics/document_positions.h); undefined when each window is one document.
  torch::Tensor positions;
};

// Rows [start, start + count) of `batch`, inputs and targets on `device` (positions stay on
// the CPU), the stream moved on to its row `start`.
Batch RowsOf(const Batch& batch, std::int64_t start, std::int64_t count, torch::Device device);

enum class SampleFormat {
  kNextToken,      // inputs [B, T] token ids, targets [B, T] next tokens (GPT)
  kSliceOfWindow,  // inputs [B, 256] byte histogram, targets [B] slice index (classifier)
  kRows,           // inputs [B, ...] and targets [B, ...] rows of data.format: tensors
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual const std::vector<DataSlice>& slices() const = 0;
  // SHA-256 identifying the data's exact content and slicing.
  virtual const std::string& fingerprint() const = 0;
  virtual int window() const = 0;
  // The smallest vocabulary that covers every token id (256 for bytes).
  virtual std::int64_t vocabulary_needed() const = 0;
  // Whether windows can be read as `format` (a byte histogram needs bytes).
  virtual bool supports(SampleFormat format) const = 0;
  // What the training split looks like (its size, its ids' counts, its rows' NaN and columns),
  // for the daemon's input-quality check: learned in the pass that hashes the files, cached
  // with their digests.
  virtual const DataProfile& profile() const = 0;

  // Samples [first, first + count) of the training stream for `seed`.
  // REQUIRES: supports(format) (CheckModelFitsData has checked it).
  virtual Batch TrainingSamples(std::uint64_t seed, std::int64_t first, std::int64_t count,
                                SampleFormat format) const = 0;
  // The held-out windows of slice `index`: `windows` evenly spaced windows.
  virtual Batch HeldOutSamples(std::size_t index, int windows, SampleFormat format) const = 0;
};

// Loads the dataset of one data format from its keys (DataSpec::options), with windows of
// `window` tokens (text, tokens; rows have their own shape). `digest_cache` (a JSON file;
// empty disables it) keeps the SHA-256 of large files by (path, size, mtime), so a
// multi-gigabyte dataset is streamed through the hash once, not every night. Errors name the
// file and the reason.
using DatasetLoader = std::function<Result<std::unique_ptr<Dataset>>(
    const DataSpec& spec, int window, const std::string& digest_cache)>;

// Adds the loader of data format `format` (its keys: spec/data_format.h); false when one is
// registered under that name. Call through TRAINERD_REGISTER_DATASET.
bool RegisterDatasetLoader(const std::string& format, DatasetLoader loader);

// The dataset of `spec.format`, by its registered loader: the one place that turns a DataSpec
// into a Dataset.
Result<std::unique_ptr<Dataset>> LoadDataset(const DataSpec& spec, int window,
                                             const std::string& digest_cache);

// Training-stream window `i` for `seed` among `starts` valid window starts: the one mixing
// rule every format uses.
std::int64_t StreamPick(std::uint64_t seed, std::int64_t i, std::int64_t starts);
// StreamPick of samples [first, first + count).
std::vector<std::int64_t> StreamPicks(std::uint64_t seed, std::int64_t first, std::int64_t count,
                                      std::int64_t starts);
// `n` evenly spaced positions in [0, last], both ends included (0 alone when n is 1): where
// held-out windows are taken.
std::vector<std::int64_t> EvenlySpaced(std::int64_t n, std::int64_t last);

}  // namespace trainerd

#define TRAINERD_DATASET_CONCAT_INNER(a, b) a##b
#define TRAINERD_DATASET_CONCAT(a, b) TRAINERD_DATASET_CONCAT_INNER(a, b)
// Registers `loader` (a DatasetLoader) for data format `format` when the program starts (the
// library holding it is linked whole).
#define TRAINERD_REGISTER_DATASET(format, loader)                                     \
  static const bool TRAINERD_DATASET_CONCAT(trainerd_registered_dataset_, __LINE__) = \
      ::trainerd::RegisterDatasetLoader((format), (loader))
