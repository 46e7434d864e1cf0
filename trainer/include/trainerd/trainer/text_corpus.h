// Real text as training data: byte-level tokens (vocabulary 256) from a list of files, one
// named slice per file. The last `holdout_fraction` of every file is held out for
// evaluation; training windows are drawn only from the other part.
//
// Sampling is a pure function of (seed, sample index): sample i of the job's training stream
// is the same window whatever the microbatch split or wherever a run was resumed, so a plan
// never changes which samples an update sees. Immutable after Load; thread-safe to read.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "trainerd/common/status.h"
#include "trainerd/trainer/job_spec.h"

namespace trainerd {

struct TextSlice {
  std::string name;  // file name, e.g. "GPL-3"
  std::string path;  // canonical path
  std::int64_t train_bytes = 0;
  std::int64_t holdout_bytes = 0;
};

// What a model reads for a run of samples; `targets` uses -1 for positions that carry no
// loss (masked tokens).
// Where the rows of a batch come from in the training stream (sample_dropout.h).
struct SampleStream {
  std::uint64_t seed = 0;
  std::int64_t first_sample = 0;  // stream index of row 0
};

struct Batch {
  torch::Tensor inputs;
  torch::Tensor targets;
  std::int64_t samples = 0;
  std::optional<SampleStream> stream;  // training samples only; none for held-out ones
};

enum class SampleFormat {
  kNextToken,      // inputs [B, T] token ids, targets [B, T] next tokens (GPT)
  kSliceOfWindow,  // inputs [B, 256] byte histogram, targets [B] slice index (classifier)
};

class TextCorpus {
 public:
  // Reads every file of `spec`. Errors (missing, unreadable, empty, a part too short for
  // `window` + 1 bytes) name the file and the reason.
  static Result<TextCorpus> Load(const DataSpec& spec, int window);

  const std::vector<TextSlice>& slices() const { return slices_; }
  // SHA-256 over every slice's name and bytes, in order: the data's exact version.
  const std::string& fingerprint() const { return fingerprint_; }
  int window() const { return window_; }
  std::int64_t total_bytes() const;

  // Samples [first, first + count) of the training stream for `seed`.
  Batch TrainingSamples(std::uint64_t seed, std::int64_t first, std::int64_t count,
                        SampleFormat format) const;
  // The held-out windows of slice `index`: `windows` evenly spaced windows.
  Batch HeldOutSamples(std::size_t index, int windows, SampleFormat format) const;

 private:
  struct Window {
    std::size_t slice;
    std::int64_t offset;  // into the slice's bytes
  };
  Batch Assemble(const std::vector<Window>& windows, SampleFormat format) const;

  std::vector<TextSlice> slices_;
  std::vector<std::string> bytes_;                // per slice, whole file
  std::vector<std::int64_t> train_start_cumsum_;  // prefix sums of valid training start positions
  std::string fingerprint_;
  int window_ = 0;
};

}  // namespace trainerd
