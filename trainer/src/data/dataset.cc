#include "trainerd/trainer/data/dataset.h"

#include "data/tensors/tensor_dataset.h"
#include "data/text/text_corpus.h"
#include "data/tokens/token_dataset.h"
#include "trainerd/common/mix.h"

namespace trainerd {

std::int64_t StreamPick(std::uint64_t seed, std::int64_t i, std::int64_t starts) {
  return static_cast<std::int64_t>(Mix(Mix(seed) ^ static_cast<std::uint64_t>(i)) %
                                   static_cast<std::uint64_t>(starts));
}

std::vector<std::int64_t> StreamPicks(std::uint64_t seed, std::int64_t first, std::int64_t count,
                                      std::int64_t starts) {
  std::vector<std::int64_t> picks;
  picks.reserve(static_cast<std::size_t>(count));
  for (std::int64_t i = first; i < first + count; ++i) picks.push_back(StreamPick(seed, i, starts));
  return picks;
}

std::vector<std::int64_t> EvenlySpaced(std::int64_t n, std::int64_t last) {
  std::vector<std::int64_t> positions;
  for (std::int64_t k = 0; k < n; ++k) positions.push_back(n == 1 ? 0 : last * k / (n - 1));
  return positions;
}

Result<std::unique_ptr<Dataset>> LoadDataset(const DataSpec& spec, int window,
                                             const std::string& digest_cache) {
  if (spec.format == DataFormat::kTensors) {
    Result<std::unique_ptr<TensorDataset>> rows = TensorDataset::Load(spec, digest_cache);
    if (!rows.ok()) return rows.status();
    return std::unique_ptr<Dataset>(std::move(*rows));
  }
  if (spec.format == DataFormat::kTokens) {
    Result<std::unique_ptr<TokenDataset>> tokens = TokenDataset::Load(spec, window, digest_cache);
    if (!tokens.ok()) return tokens.status();
    return std::unique_ptr<Dataset>(std::move(*tokens));
  }
  Result<TextCorpus> text = TextCorpus::Load(spec, window);
  if (!text.ok()) return text.status();
  return std::unique_ptr<Dataset>(std::make_unique<TextCorpus>(std::move(*text)));
}

}  // namespace trainerd
