#include "data/text/text_corpus.h"

#include <torch/torch.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "trainerd/common/sha256.h"

namespace trainerd {

Result<TextCorpus> TextCorpus::Load(const TextDataKeys& keys, int window) {
  TextCorpus corpus;
  corpus.window_ = window;
  std::set<std::string> seen;
  Sha256 hasher;
  const std::int64_t need = static_cast<std::int64_t>(window) + 1;
  for (const std::string& file : keys.files) {
    std::error_code ec;
    const auto canonical = std::filesystem::canonical(file, ec);
    if (ec) return Status::NotFound("data file " + file + ": " + ec.message());
    if (!seen.insert(canonical.string()).second) continue;  // a symlink to a file already read
    if (!std::filesystem::is_regular_file(canonical)) {
      return Status::InvalidArgument("data file " + file + ": not a regular file");
    }
    std::ifstream in(canonical, std::ios::binary);
    if (!in) return Status::IOError("data file " + file + ": cannot be read (permission denied?)");
    std::ostringstream content;
    content << in.rdbuf();
    if (in.bad()) return Status::IOError("data file " + file + ": read failed");
    std::string bytes = content.str();
    if (bytes.empty()) return Status::InvalidArgument("data file " + file + ": is empty");

    DataSlice slice;
    slice.name = canonical.filename().string();
    slice.path = canonical.string();
    const auto size = static_cast<std::int64_t>(bytes.size());
    slice.holdout_bytes =
        static_cast<std::int64_t>(static_cast<double>(size) * keys.holdout_fraction);
    slice.train_bytes = size - slice.holdout_bytes;
    if (slice.train_bytes < need || slice.holdout_bytes < need) {
      return Status::InvalidArgument(
          "data file " + file + ": too short for block_size " + std::to_string(window) + ": " +
          std::to_string(size) + " bytes give a training part of " +
          std::to_string(slice.train_bytes) + " and a held-out part of " +
          std::to_string(slice.holdout_bytes) + " bytes; each needs at least " +
          std::to_string(need));
    }
    hasher.Update(slice.name);
    hasher.Update("\0", 1);
    hasher.Update(bytes);
    // The training part's bytes, counted as they are hashed: the profile.
    corpus.profile_.id_counts.resize(256);
    for (std::int64_t i = 0; i < slice.train_bytes; ++i) {
      ++corpus.profile_.id_counts[static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)])];
    }
    corpus.profile_.train_samples += slice.train_bytes;
    corpus.slices_.push_back(std::move(slice));
    corpus.bytes_.push_back(std::move(bytes));
  }
  if (corpus.slices_.empty()) return Status::InvalidArgument("data: no files");
  std::int64_t cumulative = 0;
  for (const DataSlice& slice : corpus.slices_) {
    cumulative += slice.train_bytes - need + 1;
    corpus.train_start_cumsum_.push_back(cumulative);
  }
  corpus.fingerprint_ = hasher.HexDigest();
  return corpus;
}

std::int64_t TextCorpus::total_bytes() const {
  std::int64_t total = 0;
  for (const auto& bytes : bytes_) total += static_cast<std::int64_t>(bytes.size());
  return total;
}

Batch TextCorpus::TrainingSamples(std::uint64_t seed, std::int64_t first, std::int64_t count,
                                  SampleFormat format) const {
  const std::int64_t starts = train_start_cumsum_.back();
  std::vector<Window> windows;
  windows.reserve(static_cast<std::size_t>(count));
  for (const std::int64_t pick : StreamPicks(seed, first, count, starts)) {
    const auto it = std::upper_bound(train_start_cumsum_.begin(), train_start_cumsum_.end(), pick);
    const auto slice = static_cast<std::size_t>(it - train_start_cumsum_.begin());
    const std::int64_t before = slice == 0 ? 0 : train_start_cumsum_[slice - 1];
    windows.push_back({slice, pick - before});
  }
  Batch batch = Assemble(windows, format);
  batch.stream = SampleStream{seed, first};
  return batch;
}

Batch TextCorpus::HeldOutSamples(std::size_t index, int windows, SampleFormat format) const {
  const DataSlice& slice = slices_.at(index);
  const std::int64_t span = slice.holdout_bytes - window_ - 1;  // last valid offset in the part
  std::vector<Window> picked;
  for (const std::int64_t offset : EvenlySpaced(windows, span)) {
    picked.push_back({index, slice.train_bytes + offset});
  }
  return Assemble(picked, format);
}

Batch TextCorpus::Assemble(const std::vector<Window>& windows, SampleFormat format) const {
  const auto n = static_cast<std::int64_t>(windows.size());
  Batch batch;
  batch.samples = n;
  if (format == SampleFormat::kNextToken) {
    batch.inputs = torch::empty({n, window_}, torch::kLong);
    batch.targets = torch::empty({n, window_}, torch::kLong);
    auto in = batch.inputs.accessor<std::int64_t, 2>();
    auto out = batch.targets.accessor<std::int64_t, 2>();
    for (std::int64_t b = 0; b < n; ++b) {
      const std::string& bytes = bytes_[windows[b].slice];
      for (int t = 0; t < window_; ++t) {
        in[b][t] = static_cast<unsigned char>(bytes[windows[b].offset + t]);
        out[b][t] = static_cast<unsigned char>(bytes[windows[b].offset + t + 1]);
      }
    }
  } else {
    batch.inputs = torch::zeros({n, 256}, torch::kFloat);
    batch.targets = torch::empty({n}, torch::kLong);
    auto in = batch.inputs.accessor<float, 2>();
    auto out = batch.targets.accessor<std::int64_t, 1>();
    const float weight = 1.0f / static_cast<float>(window_);
    for (std::int64_t b = 0; b < n; ++b) {
      const std::string& bytes = bytes_[windows[b].slice];
      for (int t = 0; t < window_; ++t) {
        in[b][static_cast<unsigned char>(bytes[windows[b].offset + t])] += weight;
      }
      out[b] = static_cast<std::int64_t>(windows[b].slice);
    }
  }
  return batch;
}

namespace {

Result<std::unique_ptr<Dataset>> LoadText(const DataSpec& spec, int window,
                                          const std::string& /*digest_cache*/) {
  Result<TextCorpus> text = TextCorpus::Load(spec.options.get<TextDataKeys>(), window);
  if (!text.ok()) return text.status();
  return std::unique_ptr<Dataset>(std::make_unique<TextCorpus>(std::move(*text)));
}

TRAINERD_REGISTER_DATASET("text", LoadText);

}  // namespace
}  // namespace trainerd
