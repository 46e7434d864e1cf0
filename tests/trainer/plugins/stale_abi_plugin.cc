// A plugin built against other trainerd headers, as a library left over from an older
// release would be: it registers with the next plugin ABI, which the worker must refuse
// instead of calling into a TrainableModel of another layout.
#include <trainerd/trainer/models/model_registry.h>

namespace {

const bool registered = trainerd::RegisterModel(
    "stale_model",
    [](const trainerd::ModelContext&) -> std::shared_ptr<trainerd::TrainableModel> {
      return nullptr;
    },
    trainerd::kModelPluginAbiVersion + 1, TORCH_VERSION);

}  // namespace
