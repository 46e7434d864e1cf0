#include "trainerd/trainer/dataset.h"

#include "trainerd/common/mix.h"
#include "trainerd/trainer/tensor_dataset.h"
#include "trainerd/trainer/text_corpus.h"
#include "trainerd/trainer/token_dataset.h"

namespace trainerd {

std::int64_t StreamPick(std::uint64_t seed, std::int64_t i, std::int64_t starts) {
  return static_cast<std::int64_t>(Mix(Mix(seed) ^ static_cast<std::uint64_t>(i)) %
                                   static_cast<std::uint64_t>(starts));
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
