// model.kind: plugin, as the job spec reads it.
#include "models/plugin/plugin_spec.h"

#include "trainerd/trainer/spec/model_kind.h"

namespace trainerd {
namespace {

class PluginKind : public ModelKind {
 public:
  void Read(YamlReader& model, const ModelKeysContext& context, ModelSpec* spec) const override {
    PluginKeys keys;
    model.String("library", &keys.library, {});
    if (!model.Has("library")) {
      model.Fail("library",
                 "the plugin's shared library (.so, built with find_package(trainerd); "
                 "docs/bring-your-own-model.md)",
                 "nothing");
    }
    keys.library = AbsolutePath(keys.library, context.base_dir);
    model.String("name", &keys.name, {});
    model.JsonMap("options", &keys.options);
    ReadOwnModelKeys(model, context, spec);
    spec->options = keys;
  }
  std::string FileKey() const override { return "library"; }
  std::vector<std::string> NonIdentityKeys() const override { return {"library"}; }
};

TRAINERD_REGISTER_MODEL_KIND("plugin", PluginKind);

}  // namespace
}  // namespace trainerd
