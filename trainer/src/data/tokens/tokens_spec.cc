// data.format: tokens, as the job spec reads it.
#include "data/tokens/tokens_spec.h"

#include <limits>

#include "trainerd/trainer/spec/data_format.h"

namespace trainerd {
namespace {

class TokensFormat : public DataFormat {
 public:
  void Read(YamlReader& data, const std::string& base_dir, DataSpec* spec) const override {
    TokenDataKeys keys;
    data.String("train", &keys.train, {});
    if (!data.Has("train")) data.Fail("train", "the training token file (train.bin)", "nothing");
    keys.train = AbsolutePath(keys.train, base_dir);
    data.StringList("eval", &keys.eval);
    if (!data.Has("eval")) data.Fail("eval", "a non-empty list of evaluation splits", "nothing");
    for (auto& file : keys.eval) file = AbsolutePath(file, base_dir);
    std::string dtype = "uint16";
    data.String("dtype", &dtype, {"uint16", "uint32"});
    keys.token_bytes = dtype == "uint32" ? 4 : 2;
    data.Bool("loss_masks", &keys.loss_masks);
    data.Int("document_end", &keys.document_end, 0, std::numeric_limits<int>::max());
    data.Bool("packing", &keys.packing);
    if (data.Has("packing") && keys.document_end < 0) {
      data.Fail("packing", "data.document_end beside it (packing places documents)",
                "no documents");
    }
    spec->options = keys;
  }
  bool MasksTargets(const DataSpec& spec) const override {
    const auto keys = spec.options.get<TokenDataKeys>();
    return keys.loss_masks || keys.document_end >= 0;
  }
  bool PacksDocuments(const DataSpec& spec) const override {
    const auto keys = spec.options.get<TokenDataKeys>();
    return keys.document_end >= 0 && keys.packing;
  }
  ModelInputs DefaultInputs() const override { return ModelInputs::kTokens; }
  std::vector<ModelInputs> Gives() const override { return {ModelInputs::kTokens}; }
  std::vector<std::string> NonIdentityKeys() const override { return {"train", "eval"}; }
};

TRAINERD_REGISTER_DATA_FORMAT("tokens", TokensFormat);

}  // namespace

DataSpec TokenDataSpec(const TokenDataKeys& keys) {
  DataSpec spec;
  spec.format = "tokens";
  spec.options = keys;
  return spec;
}

}  // namespace trainerd
