// data.format: tokens: flat arrays of little-endian token ids (uint16 or uint32), the
// train.bin / val.bin convention of common LM data preparation. The files are memory-mapped,
// never read whole into RAM; a window is block_size + 1 consecutive ids (inputs and the next
// tokens). Training windows start anywhere in `data.train` (sample i a pure function of
// (seed, i)); each `data.eval` file is one evaluation slice, named by its stem. With
// `data.loss_masks`, each file's mask (loss_mask.h) leaves its unlearned targets out of the loss
// (kMaskedTarget); with `data.document_end` the files are documents (documents.h), packed with
// their positions or one to a window, padded. Windows that learn nothing are never drawn
// (learning_windows.h).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/tokens/documents.h"
#include "data/tokens/learning_windows.h"
#include "data/tokens/loss_mask.h"
#include "data/tokens/tokens_spec.h"
#include "trainerd/trainer/data/dataset.h"
#include "trainerd/trainer/data/mapped_file.h"

namespace trainerd {

class TokenDataset : public Dataset {
 public:
  // Maps every file of `keys` (and their masks). Errors name the file: missing, a size that is
  // not a whole number of ids of `data.dtype`, fewer than block_size + 1 ids; a mask's
  // (loss_mask.h), and a training mask that learns every target (the same as no mask: a chat
  // whose prompts were not found); a file in which data.document_end never occurs, or whose
  // windows learn nothing.
  static Result<std::unique_ptr<TokenDataset>> Load(const TokenDataKeys& keys, int window,
                                                    const std::string& digest_cache);

  const std::vector<DataSlice>& slices() const override { return slices_; }
  // SHA-256 over the dtype and each file's role, name and content digest.
  const std::string& fingerprint() const override { return fingerprint_; }
  int window() const override { return window_; }
  std::int64_t vocabulary_needed() const override { return max_token_ + 1; }
  bool supports(SampleFormat format) const override { return format == SampleFormat::kNextToken; }
  // The training file's ids and their counts.
  const DataProfile& profile() const override { return profile_; }
  // How many of the files' digests came from the cache rather than a pass over the file.
  int digests_from_cache() const { return digests_from_cache_; }

  Batch TrainingSamples(std::uint64_t seed, std::int64_t first, std::int64_t count,
                        SampleFormat format) const override;
  Batch HeldOutSamples(std::size_t index, int windows, SampleFormat format) const override;

 private:
  struct Mapped {
    MappedFile file;
    std::int64_t tokens = 0;
    std::optional<LossMask> mask;
    std::optional<TokenDocuments> documents;
    std::optional<LearningWindows> windows;  // with a mask or packed documents
    std::vector<DocumentPiece> pieces;       // unpacked documents
  };
  TokenDataset() = default;
  Result<Mapped> Map(const std::string& path) const;
  // Whether each window is one document's piece (data.packing: false).
  bool Unpacked() const { return document_end_ >= 0 && !packing_; }
  // Finds `file`'s documents and the windows that may be drawn.
  Status FindWindows(Mapped& file) const;
  std::int64_t Token(const Mapped& file, std::int64_t index) const;
  // Whether id `index` of `file` is learned where it is a target.
  bool Learned(const Mapped& file, std::int64_t index) const;
  // How many windows of `file` may be drawn: every one, those that learn a target, or the
  // documents' pieces.
  std::int64_t Drawable(const Mapped& file) const;
  // The ids of drawable window `pick` (its index among them).
  DocumentPiece WindowAt(const Mapped& file, std::int64_t pick) const;
  Batch Assemble(const Mapped& file, const std::vector<std::int64_t>& picks) const;

  int window_ = 0;
  int token_bytes_ = 2;
  std::int64_t document_end_ = -1;
  bool packing_ = true;
  Mapped train_;
  std::vector<Mapped> eval_;
  std::vector<DataSlice> slices_;
  std::string fingerprint_;
  std::int64_t max_token_ = 0;
  DataProfile profile_;
  int digests_from_cache_ = 0;
};

}  // namespace trainerd
