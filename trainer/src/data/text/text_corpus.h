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

#include "data/text/text_spec.h"
#include "trainerd/common/status.h"
#include "trainerd/trainer/data/dataset.h"

namespace trainerd {

class TextCorpus : public Dataset {
 public:
  // Reads every file of `keys`. Errors (missing, unreadable, empty, a part too short for
  // `window` + 1 bytes) name the file and the reason.
  static Result<TextCorpus> Load(const TextDataKeys& keys, int window);

  const std::vector<DataSlice>& slices() const override { return slices_; }
  // SHA-256 over every slice's name and bytes, in order: the data's exact version.
  const std::string& fingerprint() const override { return fingerprint_; }
  int window() const override { return window_; }
  std::int64_t vocabulary_needed() const override { return 256; }
  bool supports(SampleFormat format) const override { return format != SampleFormat::kRows; }
  // The training parts' bytes and their counts.
  const DataProfile& profile() const override { return profile_; }
  std::int64_t total_bytes() const;

  Batch TrainingSamples(std::uint64_t seed, std::int64_t first, std::int64_t count,
                        SampleFormat format) const override;
  Batch HeldOutSamples(std::size_t index, int windows, SampleFormat format) const override;

 private:
  struct Window {
    std::size_t slice;
    std::int64_t offset;  // into the slice's bytes
  };
  Batch Assemble(const std::vector<Window>& windows, SampleFormat format) const;

  std::vector<DataSlice> slices_;
  std::vector<std::string> bytes_;                // per slice, whole file
  std::vector<std::int64_t> train_start_cumsum_;  // prefix sums of valid training start positions
  std::string fingerprint_;
  int window_ = 0;
  DataProfile profile_;
};

}  // namespace trainerd
