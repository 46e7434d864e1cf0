// data.format: tensors: inputs and targets as arrays whose rows are samples, in the formats
// pipelines already write. Each split (`data.train`, every `data.eval`) is either one
// `.safetensors` file holding the tensors `data.inputs` and `data.targets` (default names
// "inputs" and "targets") or a directory holding `<inputs>.npy` and `<targets>.npy`. Files are
// memory-mapped, never read whole into RAM. A sample is one row: the training stream's sample
// i is a row picked by (seed, i) (StreamPick, as for every format); each eval split is one
// slice named by its stem. Floating-point elements reach the model as float32, integer and
// bool ones as int64 (token ids, class indices).
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/tensors/tensors_spec.h"
#include "trainerd/common/array_file.h"
#include "trainerd/trainer/data/dataset.h"
#include "trainerd/trainer/data/mapped_file.h"

namespace trainerd {

class TensorDataset : public Dataset {
 public:
  // Maps and checks every split of `keys`. Errors name the file: missing, not .npy or
  // .safetensors, truncated, an unsupported element type, a tensor name it lacks, inputs and
  // targets of different row counts, no rows, an eval split whose rows differ in shape or
  // kind from the training split's.
  static Result<std::unique_ptr<TensorDataset>> Load(const TensorDataKeys& keys,
                                                     const std::string& digest_cache);

  const std::vector<DataSlice>& slices() const override { return slices_; }
  // SHA-256 over the tensor names and each file's role, name and content digest.
  const std::string& fingerprint() const override { return fingerprint_; }
  // Target elements per sample: 1 for a class per row, T for a row of T next tokens.
  int window() const override { return window_; }
  // One more than the largest integer target (the classes cross_entropy needs); 0 for
  // floating-point targets.
  std::int64_t vocabulary_needed() const override { return largest_target_ + 1; }
  bool supports(SampleFormat format) const override { return format == SampleFormat::kRows; }
  // The training rows: their integer targets' classes counted, the rows holding a NaN or an
  // infinity (in inputs, and in targets, added), the floating-point inputs' columns.
  const DataProfile& profile() const override { return profile_; }
  bool float_targets() const { return IsFloatingPoint(train_.targets.type); }
  std::int64_t training_rows() const { return train_.rows; }

  Batch TrainingSamples(std::uint64_t seed, std::int64_t first, std::int64_t count,
                        SampleFormat format) const override;
  // min(windows, rows) evenly spaced rows of eval split `index`.
  Batch HeldOutSamples(std::size_t index, int windows, SampleFormat format) const override;

 private:
  struct Split {
    std::string name;
    std::vector<MappedFile> files;  // one .safetensors file, or inputs.npy and targets.npy
    std::size_t inputs_file = 0, targets_file = 0;  // indices into `files`
    ArrayView inputs, targets;
    std::int64_t rows = 0;
  };
  TensorDataset() = default;
  static Result<Split> OpenSplit(const TensorDataKeys& keys, const std::string& path);
  Batch Assemble(const Split& split, const std::vector<std::int64_t>& rows) const;
  // Adds what the scans of one file of split `role` found (DigestFile's result) to the
  // largest target and, for the training split, the profile; Corruption when it is not what
  // the scans write (a cache edited by hand).
  Status AddScanned(const std::string& role, const nlohmann::json& scanned);

  Split train_;
  std::vector<Split> eval_;
  std::vector<DataSlice> slices_;
  std::string fingerprint_;
  int window_ = 1;
  std::int64_t largest_target_ = -1;
  DataProfile profile_;
};

}  // namespace trainerd
