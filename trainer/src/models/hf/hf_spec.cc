// model.kind: hf, as the job spec reads it: `path` names a folder as save_pretrained writes
// it, whose config.json gives every hyper-parameter (the job states none of them).
#include "models/hf/hf_spec.h"

#include <map>
#include <string>
#include <vector>

#include "models/hf/hf_index_spec.h"
#include "trainerd/common/sha256.h"
#include "trainerd/trainer/spec/model_kind.h"

namespace trainerd {
namespace {

class HfKind : public ModelKind {
 public:
  void Read(YamlReader& model, const ModelKeysContext& context, ModelSpec* spec) const override {
    HfKeys keys;
    model.String("path", &keys.path, {});
    if (!model.Has("path")) {
      model.Fail("path",
                 "a Hugging Face causal-LM folder (config.json, model.safetensors or "
                 "model.safetensors.index.json with its shards)",
                 "nothing");
    } else {
      keys.path = AbsolutePath(keys.path, context.base_dir);
      Result<HfDecoderConfig> config = ReadHfConfig(keys.path);
      if (config.ok()) {
        keys.config = *config;
      } else {
        model.Fail(
            "path",
            "a folder whose config.json trainerd can train (" + config.status().message() + ")",
            keys.path);
      }
    }
    spec->options = keys;
    spec->inputs = ModelInputs::kTokens;
  }
  std::optional<int> DeclaredBlocks(const ModelSpec& spec) const override {
    return spec.options.get<HfKeys>().config.num_hidden_layers;
  }
  std::optional<bool> DeclaredBatchStatistics(const ModelSpec& /*spec*/) const override {
    return false;
  }
  std::optional<DeclaredOutputs> Outputs(const ModelSpec& spec) const override {
    return DeclaredOutputs{"path: config.json: vocab_size",
                           spec.options.get<HfKeys>().config.vocab_size};
  }
  std::string FileKey() const override { return "path"; }
  // What of the folder is trained: config.json and the weights (model.safetensors, or the index
  // and its shards). Its README, tokenizer and generation_config.json train nothing: editing
  // them leaves the job, and a half-trained night's checkpoint, as they were.
  Result<std::string> ContentSha256(const std::string& folder) const override {
    Result<std::map<std::string, std::vector<std::string>>> weights = HfWeightFiles(folder);
    if (!weights.ok()) return weights.status();
    std::vector<std::string> trained = {"config.json"};
    if (!weights->contains(kHfWeightsFile)) trained.push_back(kHfIndexFile);
    for (const auto& [file, tensors] : *weights) trained.push_back(file);
    return Sha256Files(folder, trained);
  }
  bool ReadsModelInputs() const override { return false; }
  bool KeepsDocumentsApart() const override { return true; }
  std::vector<std::string> NonIdentityKeys() const override { return {"path"}; }
};

TRAINERD_REGISTER_MODEL_KIND("hf", HfKind);

}  // namespace
}  // namespace trainerd
