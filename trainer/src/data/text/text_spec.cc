// data.format: text, as the job spec reads it.
#include "data/text/text_spec.h"

#include "trainerd/trainer/spec/data_format.h"

namespace trainerd {
namespace {

class TextFormat : public DataFormat {
 public:
  void Read(YamlReader& data, const std::string& base_dir, DataSpec* spec) const override {
    TextDataKeys keys;
    data.StringList("files", &keys.files);
    if (!data.Has("files")) data.Fail("files", "a non-empty list of text files", "nothing");
    for (auto& file : keys.files) file = AbsolutePath(file, base_dir);
    data.Double("holdout_fraction", &keys.holdout_fraction, 0.0, 0.5, /*min_open=*/true);
    spec->options = keys;
  }
  ModelInputs DefaultInputs() const override { return ModelInputs::kTokens; }
  std::vector<ModelInputs> Gives() const override {
    return {ModelInputs::kTokens, ModelInputs::kByteHistogram};
  }
  std::vector<std::string> NonIdentityKeys() const override { return {"files"}; }
};

TRAINERD_REGISTER_DATA_FORMAT("text", TextFormat);

}  // namespace

DataSpec TextDataSpec(const TextDataKeys& keys) {
  DataSpec spec;
  spec.format = "text";
  spec.options = keys;
  return spec;
}

}  // namespace trainerd
