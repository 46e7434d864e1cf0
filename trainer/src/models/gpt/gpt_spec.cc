// model.kind: gpt, as the job spec reads it.
#include "models/gpt/gpt_spec.h"

#include "trainerd/trainer/spec/model_kind.h"

namespace trainerd {
namespace {

constexpr int kMaxVocabulary = 1 << 24;

class GptKind : public ModelKind {
 public:
  void Read(YamlReader& model, const ModelKeysContext& /*context*/,
            ModelSpec* spec) const override {
    GptOptions gpt;
    model.Int("n_layer", &gpt.n_layer, 1, 1024);
    model.Int("n_head", &gpt.n_head, 1, 1024);
    model.Int("n_embd", &gpt.n_embd, 1, 65536);
    model.Int("vocab_size", &gpt.vocab_size, 1, kMaxVocabulary);
    model.Double("dropout", &gpt.dropout, 0.0, 0.99);
    model.Bool("bias", &gpt.bias);
    std::string kernels = kGptKernelsNames.Name(gpt.kernels);
    model.String("kernels", &kernels, kGptKernelsNames.Names());
    gpt.kernels = kGptKernelsNames.Parse(kernels).value_or(gpt.kernels);
    if (model.ok() && gpt.n_embd % gpt.n_head != 0) {
      model.Fail("n_head",
                 "an integer that divides model.n_embd (" + std::to_string(gpt.n_embd) + ")",
                 std::to_string(gpt.n_head));
    }
    spec->options = gpt;
    spec->inputs = ModelInputs::kTokens;
  }
  std::optional<int> DeclaredBlocks(const ModelSpec& spec) const override {
    return GptOptionsOf(spec).n_layer;
  }
  std::optional<bool> DeclaredBatchStatistics(const ModelSpec& /*spec*/) const override {
    return false;
  }
  std::optional<DeclaredOutputs> Outputs(const ModelSpec& spec) const override {
    return DeclaredOutputs{"vocab_size", GptOptionsOf(spec).vocab_size};
  }
  // Both kernels compute the same job (a checkpoint written under one resumes under the other).
  bool KeepsDocumentsApart() const override { return true; }
  std::vector<std::string> NonIdentityKeys() const override { return {"kernels"}; }
};

TRAINERD_REGISTER_MODEL_KIND("gpt", GptKind);

}  // namespace

ModelSpec GptModelSpec(const GptOptions& options) {
  ModelSpec spec;
  spec.kind = "gpt";
  spec.options = options;
  spec.block_size = options.block_size;
  spec.inputs = ModelInputs::kTokens;
  return spec;
}

GptOptions GptOptionsOf(const ModelSpec& spec) {
  GptOptions options = spec.options.get<GptOptions>();
  options.block_size = spec.block_size;
  return options;
}

}  // namespace trainerd
