#include "data/tokens/token_dataset.h"

#include <torch/torch.h>

#include <algorithm>
#include <filesystem>

#include "data/data_profile_scans.h"
#include "trainerd/common/sha256.h"
#include "trainerd/trainer/spec/data_format.h"

namespace trainerd {
namespace {

// The little-endian id of `width` bytes at `at`.
std::int64_t DecodeId(const unsigned char* at, int width) {
  std::uint32_t id = 0;
  for (int b = width - 1; b >= 0; --b) id = (id << 8) | at[b];
  return id;
}

// Where the mask of id file `path` is: beside it, its extension .mask.
std::string MaskPath(const std::string& path) {
  return std::filesystem::path(path).replace_extension(".mask").string();
}

}  // namespace

Result<TokenDataset::Mapped> TokenDataset::Map(const std::string& path) const {
  const std::string dtype = token_bytes_ == 4 ? "uint32" : "uint16";
  Result<MappedFile> file = MappedFile::Open(path, /*access_random=*/true);
  if (!file.ok()) return file.status();
  if (file->size() % static_cast<std::size_t>(token_bytes_) != 0) {
    return Status::InvalidArgument("data file " + path + ": " + std::to_string(file->size()) +
                                   " bytes is not a whole number of " + dtype +
                                   " token ids (data.dtype); truncated?");
  }
  Mapped m;
  m.tokens = static_cast<std::int64_t>(file->size()) / token_bytes_;
  if (m.tokens < window_ + 1 && !Unpacked()) {
    return Status::InvalidArgument(
        "data file " + path + ": " + std::to_string(m.tokens) +
        " token ids, fewer than one window of block_size + 1 = " + std::to_string(window_ + 1));
  }
  m.file = std::move(*file);
  return m;
}

Result<std::unique_ptr<TokenDataset>> TokenDataset::Load(const TokenDataKeys& keys, int window,
                                                         const std::string& digest_cache) {
  std::unique_ptr<TokenDataset> d(new TokenDataset());
  d->window_ = window;
  d->token_bytes_ = keys.token_bytes;
  d->document_end_ = keys.document_end;
  d->packing_ = keys.packing;
  const int width = keys.token_bytes;
  Sha256 hasher;
  hasher.Update(width == 4 ? "tokens uint32" : "tokens uint16");
  if (keys.document_end >= 0) {
    hasher.Update(" documents ending at " + std::to_string(keys.document_end) +
                  (keys.packing ? ", packed" : ", one to a window"));
  }
  const auto add = [&](const std::string& role, const std::string& path) -> Result<Mapped> {
    Result<Mapped> mapped = d->Map(path);
    if (!mapped.ok()) return mapped.status();
    const std::string scan_key = width == 4 ? "uint32 token ids" : "uint16 token ids";
    Result<FileDigest> digest = DigestFile(path, scan_key, TokenIdScan(width).get(), digest_cache);
    if (!digest.ok()) return digest.status();
    std::optional<IdHistogram> ids = IdHistogram::FromJson(digest->scanned);
    if (!ids) {  // a cache edited by hand: the pass again, without it
      digest = DigestFile(path, scan_key, TokenIdScan(width).get(), "");
      if (!digest.ok()) return digest.status();
      ids = IdHistogram::FromJson(digest->scanned);
    }
    d->max_token_ = std::max(d->max_token_, ids->largest());
    if (role == "train") d->profile_.id_counts = ids->counts();
    d->digests_from_cache_ += digest->from_cache ? 1 : 0;
    const std::string stem = std::filesystem::path(path).stem().string();
    hasher.Update("\n" + role + " " + stem + " " + digest->sha256);
    if (keys.loss_masks) {
      Result<LossMask> mask = LossMask::Load(MaskPath(path), path, mapped->tokens);
      if (!mask.ok()) return mask.status();
      Result<FileDigest> mask_digest = DigestFile(mask->path(), "", nullptr, digest_cache);
      if (!mask_digest.ok()) return mask_digest.status();
      d->digests_from_cache_ += mask_digest->from_cache ? 1 : 0;
      hasher.Update("\n" + role + " mask " + stem + " " + mask_digest->sha256);
      mapped->mask = std::move(*mask);
    }
    if (Status found = d->FindWindows(*mapped); !found.ok()) return found;
    return mapped;
  };
  Result<Mapped> train = add("train", keys.train);
  if (!train.ok()) return train.status();
  d->train_ = std::move(*train);
  d->profile_.train_samples = d->train_.tokens;
  if (const std::optional<LossMask>& mask = d->train_.mask) {
    if (mask->learned() == mask->targets()) {
      return Status::InvalidArgument(
          "data.loss_masks: " + mask->path() +
          ": every id is marked 1, the same as no mask: a "
          "chat's mask leaves its prompts out (examples/hf/chat_to_tokens.py); to learn every "
          "token, drop data.loss_masks");
    }
    d->profile_.learned_targets = mask->learned();
  }
  if (const std::optional<TokenDocuments>& documents = d->train_.documents) {
    d->profile_.documents = documents->Profile();
    d->profile_.documents->padding_share = PaddingShare(d->train_.pieces, window);
  }
  for (const std::string& path : keys.eval) {
    Result<Mapped> eval = add("eval", path);
    if (!eval.ok()) return eval.status();
    d->slices_.push_back({std::filesystem::path(path).stem().string(), path, 0,
                          static_cast<std::int64_t>(eval->file.size())});
    d->eval_.push_back(std::move(*eval));
  }
  d->fingerprint_ = hasher.HexDigest();
  return d;
}

std::int64_t TokenDataset::Token(const Mapped& file, std::int64_t index) const {
  return DecodeId(file.file.data() + index * token_bytes_, token_bytes_);
}

bool TokenDataset::Learned(const Mapped& file, std::int64_t index) const {
  if (file.mask && !file.mask->Learned(index)) return false;
  return document_end_ < 0 || Token(file, index - 1) != document_end_;
}

Status TokenDataset::FindWindows(Mapped& file) const {
  const std::string path = file.file.path();
  const auto learned = [&](std::int64_t p) { return Learned(file, p); };
  if (document_end_ >= 0) {
    file.documents = TokenDocuments::Find(file.tokens, document_end_,
                                          [&](std::int64_t p) { return Token(file, p); });
    if (!file.documents->ended()) {
      return Status::InvalidArgument("data.document_end: " + std::to_string(document_end_) +
                                     " never occurs in " + path +
                                     ": the id that ends each document (the tokenizer's EOS)");
    }
  }
  if (Unpacked()) {
    file.pieces = file.documents->Pieces(window_, learned);
  } else if (document_end_ >= 0 || file.mask) {
    file.windows = LearningWindows::Find(file.tokens, window_, learned);
  }
  if (Drawable(file) == 0) {
    return Status::InvalidArgument(
        "data file " + path + ": no window of block_size + 1 = " + std::to_string(window_ + 1) +
        " ids learns a target (each document's first id is not learned after data.document_end, "
        "nor an id its loss mask marks 0)");
  }
  return Status::Ok();
}

DocumentPiece TokenDataset::WindowAt(const Mapped& file, std::int64_t pick) const {
  if (Unpacked()) return file.pieces[static_cast<std::size_t>(pick)];
  return {file.windows ? file.windows->Start(pick) : pick, window_ + 1};
}

Batch TokenDataset::Assemble(const Mapped& file, const std::vector<std::int64_t>& picks) const {
  const auto n = static_cast<std::int64_t>(picks.size());
  Batch batch;
  batch.samples = n;
  batch.inputs = torch::full({n, window_}, std::max<std::int64_t>(document_end_, 0), torch::kLong);
  batch.targets = torch::full({n, window_}, kMaskedTarget, torch::kLong);
  const bool packed = document_end_ >= 0 && !Unpacked();
  if (packed) batch.positions = torch::empty({n, window_}, torch::kLong);
  auto in = batch.inputs.accessor<std::int64_t, 2>();
  auto out = batch.targets.accessor<std::int64_t, 2>();
  std::optional<at::TensorAccessor<std::int64_t, 2>> position_of;
  if (packed) position_of.emplace(batch.positions.accessor<std::int64_t, 2>());
  for (std::int64_t b = 0; b < n; ++b) {
    const DocumentPiece piece = WindowAt(file, picks[b]);
    std::int64_t position = 0;
    for (std::int64_t t = 0; t + 1 < piece.length; ++t) {
      const std::int64_t id = Token(file, piece.start + t);
      const std::int64_t target = piece.start + t + 1;
      in[b][t] = id;
      if (Learned(file, target)) out[b][t] = Token(file, target);
      if (!packed) continue;
      // A document begins after the id that ends the one before.
      if (t > 0 && in[b][t - 1] == document_end_) position = 0;
      (*position_of)[b][t] = position++;
    }
  }
  return batch;
}

std::int64_t TokenDataset::Drawable(const Mapped& file) const {
  if (Unpacked()) return static_cast<std::int64_t>(file.pieces.size());
  return file.windows ? file.windows->starts() : file.tokens - window_;
}

Batch TokenDataset::TrainingSamples(std::uint64_t seed, std::int64_t first, std::int64_t count,
                                    SampleFormat format) const {
  TORCH_CHECK(supports(format), "token data gives next-token windows only");
  Batch batch = Assemble(train_, StreamPicks(seed, first, count, Drawable(train_)));
  batch.stream = SampleStream{seed, first};
  return batch;
}

Batch TokenDataset::HeldOutSamples(std::size_t index, int windows, SampleFormat format) const {
  TORCH_CHECK(supports(format), "token data gives next-token windows only");
  const Mapped& file = eval_.at(index);
  return Assemble(file, EvenlySpaced(windows, Drawable(file) - 1));
}

namespace {

Result<std::unique_ptr<Dataset>> LoadTokens(const DataSpec& spec, int window,
                                            const std::string& digest_cache) {
  Result<std::unique_ptr<TokenDataset>> tokens =
      TokenDataset::Load(spec.options.get<TokenDataKeys>(), window, digest_cache);
  if (!tokens.ok()) return tokens.status();
  return std::unique_ptr<Dataset>(std::move(*tokens));
}

TRAINERD_REGISTER_DATASET("tokens", LoadTokens);

}  // namespace
}  // namespace trainerd
