// model.kind: torchscript, as the job spec reads it.
#include "models/torchscript/torchscript_spec.h"

#include "trainerd/trainer/spec/model_kind.h"

namespace trainerd {
namespace {

class TorchScriptKind : public ModelKind {
 public:
  void Read(YamlReader& model, const ModelKeysContext& context, ModelSpec* spec) const override {
    TorchScriptKeys keys;
    model.String("path", &keys.path, {});
    if (!model.Has("path")) {
      model.Fail("path", "the TorchScript file (.pt) the model was exported to", "nothing");
    }
    keys.path = AbsolutePath(keys.path, context.base_dir);
    keys.protocol_named = model.Has("blocks") || model.Has("embed") || model.Has("head");
    model.String("blocks", &keys.protocol.blocks, {});
    model.String("embed", &keys.protocol.embed, {});
    model.String("head", &keys.protocol.head, {});
    ReadOwnModelKeys(model, context, spec);
    spec->options = keys;
  }
  std::string FileKey() const override { return "path"; }
  std::string OwnLossHint() const override {
    return "an exported method 'loss(outputs, targets) -> (sum, count)' (@torch.jit.export)";
  }
  std::vector<std::string> NonIdentityKeys() const override { return {"path", "protocol_named"}; }
};

TRAINERD_REGISTER_MODEL_KIND("torchscript", TorchScriptKind);

}  // namespace
}  // namespace trainerd
