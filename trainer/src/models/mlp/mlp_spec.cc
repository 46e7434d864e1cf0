// model.kind: mlp, as the job spec reads it.
#include "models/mlp/mlp_spec.h"

#include "trainerd/trainer/spec/model_kind.h"

namespace trainerd {
namespace {

class MlpKind : public ModelKind {
 public:
  void Read(YamlReader& model, const ModelKeysContext& /*context*/,
            ModelSpec* spec) const override {
    MlpOptions mlp;
    model.Int("hidden", &mlp.hidden, 1, 65536);
    model.Int("layers", &mlp.layers, 1, 1024);
    model.Bool("batch_norm", &mlp.batch_norm);
    model.Double("dropout", &mlp.dropout, 0.0, 0.99);
    spec->options = mlp;
    spec->inputs = ModelInputs::kByteHistogram;
  }
  std::optional<int> DeclaredBlocks(const ModelSpec& spec) const override {
    return spec.options.get<MlpOptions>().layers;
  }
  std::optional<bool> DeclaredBatchStatistics(const ModelSpec& spec) const override {
    return spec.options.get<MlpOptions>().batch_norm;
  }
};

TRAINERD_REGISTER_MODEL_KIND("mlp", MlpKind);

}  // namespace

ModelSpec MlpModelSpec(const MlpOptions& options, int block_size) {
  ModelSpec spec;
  spec.kind = "mlp";
  spec.options = options;
  spec.block_size = block_size;
  spec.inputs = ModelInputs::kByteHistogram;
  return spec;
}

}  // namespace trainerd
