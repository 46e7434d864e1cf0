// A data format as the job spec knows it, without torch: how its keys of the job's `data:`
// section are read. Every format registers one under its name (TRAINERD_REGISTER_DATA_FORMAT
// in its *_spec.cc), and its dataset under the same name in the dataset factory
// (data/dataset.h). The parser and the job identity ask the format; none of them names one.
// Registration happens during static initialisation; lookups after it are thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "trainerd/trainer/spec/job_spec.h"
#include "trainerd/trainer/spec/yaml_reader.h"

namespace trainerd {

// The target a dataset gives where a loss mask leaves a position out (data.loss_masks) or a
// document begins (data.document_end): PyTorch's and transformers' ignore_index, which
// model.ignore_index must then be.
inline constexpr std::int64_t kMaskedTarget = -100;

class DataFormat {
 public:
  virtual ~DataFormat() = default;

  // Reads the format's keys of `data:` (all but `format` and `eval_windows_per_slice`) into
  // spec->options with every default filled in, relative paths made absolute against
  // `base_dir`. Errors go to `data`.
  virtual void Read(YamlReader& data, const std::string& base_dir, DataSpec* spec) const = 0;
  // What a model reads of this data unless model.inputs says otherwise.
  virtual ModelInputs DefaultInputs() const = 0;
  // What a model may read of it, DefaultInputs() first.
  virtual std::vector<ModelInputs> Gives() const = 0;
  // Keys of `options` left out of the job identity: the files, whose content the data's
  // fingerprint covers.
  virtual std::vector<std::string> NonIdentityKeys() const = 0;
  // True when `spec`'s data leaves targets out of the loss as kMaskedTarget (a loss mask, the
  // first id of a document).
  virtual bool MasksTargets(const DataSpec& /*spec*/) const { return false; }
  // True when a window of `spec`'s data may hold several documents that must not see each
  // other (semantics/document_positions.h): only a model kind that keeps them apart reads it.
  virtual bool PacksDocuments(const DataSpec& /*spec*/) const { return false; }
};

// Adds `format` under `name`; false (and nothing added) when a format of that name exists.
bool RegisterDataFormat(const std::string& name, std::unique_ptr<DataFormat> format);
// The format registered as `name`, or nullptr.
const DataFormat* FindDataFormat(const std::string& name);
// Every registered name, sorted: the allowed values of data.format.
std::vector<std::string> DataFormatNames();
// The format of `spec`. REQUIRES: registered (the parser accepts no other).
const DataFormat& DataFormatOf(const DataSpec& spec);

}  // namespace trainerd

#define TRAINERD_DATA_CONCAT_INNER(a, b) a##b
#define TRAINERD_DATA_CONCAT(a, b) TRAINERD_DATA_CONCAT_INNER(a, b)
// Registers a DataFormat subclass `FormatClass` as `name` when the program starts (the library
// holding it is linked whole).
#define TRAINERD_REGISTER_DATA_FORMAT(name, FormatClass)                          \
  static const bool TRAINERD_DATA_CONCAT(trainerd_registered_format_, __LINE__) = \
      ::trainerd::RegisterDataFormat((name), std::make_unique<FormatClass>())
