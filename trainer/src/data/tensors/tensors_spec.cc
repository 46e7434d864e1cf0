// data.format: tensors, as the job spec reads it.
#include "data/tensors/tensors_spec.h"

#include "trainerd/trainer/spec/data_format.h"

namespace trainerd {
namespace {

class TensorsFormat : public DataFormat {
 public:
  void Read(YamlReader& data, const std::string& base_dir, DataSpec* spec) const override {
    TensorDataKeys keys;
    data.String("train", &keys.train, {});
    if (!data.Has("train")) {
      data.Fail("train", "the training split (a .safetensors file or a directory of .npy files)",
                "nothing");
    }
    keys.train = AbsolutePath(keys.train, base_dir);
    data.StringList("eval", &keys.eval);
    if (!data.Has("eval")) data.Fail("eval", "a non-empty list of evaluation splits", "nothing");
    for (auto& file : keys.eval) file = AbsolutePath(file, base_dir);
    data.String("inputs", &keys.inputs, {});
    data.String("targets", &keys.targets, {});
    spec->options = keys;
  }
  ModelInputs DefaultInputs() const override { return ModelInputs::kRows; }
  std::vector<ModelInputs> Gives() const override { return {ModelInputs::kRows}; }
  std::vector<std::string> NonIdentityKeys() const override { return {"train", "eval"}; }
};

TRAINERD_REGISTER_DATA_FORMAT("tensors", TensorsFormat);

}  // namespace

DataSpec TensorDataSpec(const TensorDataKeys& keys) {
  DataSpec spec;
  spec.format = "tensors";
  spec.options = keys;
  return spec;
}

}  // namespace trainerd
