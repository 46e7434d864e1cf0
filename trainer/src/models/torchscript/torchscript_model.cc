#include "models/torchscript/torchscript_model.h"

#include <torch/csrc/jit/python/update_graph_executor_opt.h>
#include <torch/torch.h>

#include <algorithm>
#include <filesystem>

#include "trainerd/trainer/models/build_model.h"
#include "trainerd/trainer/models/model_registry.h"

namespace trainerd {
namespace {

// The last component of a submodule's TorchScript class name ("Dropout" for
// __torch__.torch.nn.modules.dropout.Dropout).
std::string ClassName(const torch::jit::Module& module) {
  const auto name = module.type()->name();
  return name ? name->name() : "";
}

bool IsDropout(const torch::jit::Module& module) {
  return ClassName(module).find("Dropout") != std::string::npos;
}

// nn::Module names may not contain dots: "blocks.0.fc.weight" -> "blocks__0__fc__weight".
std::string RegisteredName(const std::string& dotted) {
  std::string name;
  for (const char c : dotted) name += c == '.' ? std::string("__") : std::string(1, c);
  return name;
}

// A module's parameter_list or buffer_list as the tensors CheckpointedForward takes.
template <typename TensorList>
std::vector<torch::Tensor> Tensors(const TensorList& list) {
  std::vector<torch::Tensor> out;
  for (const torch::Tensor& t : list) out.push_back(t);
  return out;
}

// The block protocol's parts, or why the module lacks them ("" when it has them all).
std::string MissingProtocol(const torch::jit::Module& module, const BlockProtocol& o) {
  std::string missing;
  const auto add = [&missing](const std::string& what) {
    missing += (missing.empty() ? "" : ", ") + what;
  };
  const bool has_list = module.hasattr(o.blocks) && module.attr(o.blocks).isModule();
  if (!has_list) add("a ModuleList attribute '" + o.blocks + "'");
  if (!module.find_method(o.embed)) add("an exported method '" + o.embed + "'");
  if (!module.find_method(o.head)) add("an exported method '" + o.head + "'");
  return missing;
}

}  // namespace

TorchScriptModel::TorchScriptModel(const TorchScriptKeys& keys, ModelInputs inputs)
    : keys_(keys), inputs_(inputs), module_(torch::jit::load(keys.path)) {
  // The graph executor's optimisations (differentiable subgraphs built after its profiling
  // runs) change a module's memory after its first calls, so a ledger measured on the first
  // updates would not be the run's (a planned run went over its budget in backward). The
  // worker runs TorchScript op by op, as the built-in models run. Process-wide.
  torch::jit::setGraphExecutorOptimize(false);
  for (const auto& p : module_.named_parameters(/*recurse=*/true)) {
    register_parameter(RegisteredName(p.name), p.value, p.value.requires_grad());
  }
  for (const auto& b : module_.named_buffers(/*recurse=*/true)) {
    register_buffer(RegisteredName(b.name), b.value);
  }
  missing_protocol_ = MissingProtocol(module_, keys_.protocol);
  if (!missing_protocol_.empty()) return;
  for (const torch::jit::Module& block :
       module_.attr(keys_.protocol.blocks).toModule().children()) {
    blocks_.push_back(block);
    block_parameters_.push_back(Tensors(block.parameters()));
    block_buffers_.push_back(Tensors(block.buffers()));
  }
}

torch::Tensor TorchScriptModel::forward(const torch::Tensor& inputs) {
  if (!has_block_protocol()) return module_.forward({inputs}).toTensor();
  torch::Tensor x = module_.get_method(keys_.protocol.embed)({inputs}).toTensor();
  for (std::size_t i = 0; i < blocks_.size(); ++i) {
    torch::jit::Module block = blocks_[i];
    x = RunBlock(
        static_cast<int>(i),
        [block](const torch::Tensor& in) mutable { return block.forward({in}).toTensor(); },
        block_parameters_[i], block_buffers_[i], x);
  }
  return module_.get_method(keys_.protocol.head)({x}).toTensor();
}

SampleFormat TorchScriptModel::sample_format() const { return SampleFormatOf(inputs_); }

LossTerms TorchScriptModel::Loss(const torch::Tensor& outputs, const torch::Tensor& targets) {
  if (loss().kind != LossKind::kModule) return TrainableModel::Loss(outputs, targets);
  const c10::IValue result = module_.get_method(kLossMethod)({outputs, targets});
  TORCH_CHECK(result.isTuple() && result.toTuple()->elements().size() == 2,
              "loss(outputs, targets) must return (sum, count)");
  const c10::IValue& sum = result.toTuple()->elements()[0];
  const c10::IValue& count = result.toTuple()->elements()[1];
  TORCH_CHECK(sum.isTensor() && sum.toTensor().numel() == 1,
              "loss(outputs, targets): the sum must be a one-element tensor");
  TORCH_CHECK(count.isInt() || (count.isTensor() && count.toTensor().numel() == 1),
              "loss(outputs, targets): the count must be an int");
  LossTerms terms;
  terms.sum = sum.toTensor().reshape({});
  terms.count = count.isInt() ? count.toInt() : count.toTensor().item<std::int64_t>();
  return terms;
}

bool TorchScriptModel::has_batch_statistics() const {
  for (const auto& m : module_.named_modules()) {
    if (ClassName(m.value).find("BatchNorm") != std::string::npos) return true;
  }
  return false;
}

void TorchScriptModel::train(bool on) {
  TrainableModel::train(on);
  module_.train(on);
  for (torch::jit::Module& dropout : own_dropout_) dropout.train(false);
}

void TorchScriptModel::SaveArtifact(const std::string& path) { module_.save(path); }

std::vector<std::pair<std::string, torch::Tensor>> TorchScriptModel::StateDict() const {
  std::vector<std::pair<std::string, torch::Tensor>> state;
  for (const auto& p : module_.named_parameters(/*recurse=*/true)) {
    state.emplace_back(p.name, p.value);
  }
  for (const auto& b : module_.named_buffers(/*recurse=*/true)) state.emplace_back(b.name, b.value);
  return state;
}

bool TorchScriptModel::has_own_loss() const { return module_.find_method(kLossMethod).has_value(); }

std::string TorchScriptModel::blocks_note() const {
  if (has_block_protocol()) return "";
  return "the TorchScript module has no block protocol (it lacks " + missing_protocol_ +
         "): it runs as one opaque block, so no plan checkpoints part of it";
}

int TorchScriptModel::SwitchOffOwnDropout() {
  own_dropout_.clear();
  for (const auto& m : module_.named_modules()) {
    if (IsDropout(m.value)) own_dropout_.push_back(m.value);
  }
  train(is_training());
  return static_cast<int>(own_dropout_.size());
}

namespace {

// The module of the job's model.path, or ModelLoadError naming the job file, model.path and
// why: no such file, not TorchScript, a block protocol the job names that the module lacks.
std::shared_ptr<TrainableModel> LoadTorchScriptModel(const ModelContext& context) {
  const TorchScriptKeys keys = context.options.get<TorchScriptKeys>();
  const std::string where = context.origin + ": model.path: " + keys.path;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(keys.path, ec)) {
    throw ModelLoadError(where +
                         ": no such file (export the model with "
                         "torch.jit.script(model).save(path))");
  }
  std::shared_ptr<TorchScriptModel> model;
  try {
    model = std::make_shared<TorchScriptModel>(keys, context.inputs);
  } catch (const std::exception& e) {
    throw ModelLoadError(where +
                         ": not a loadable TorchScript module (export it with torch.jit.script "
                         "or torch.jit.trace, then save): " +
                         ModelErrorReason(e));
  }
  if (keys.protocol_named && !model->has_block_protocol()) {
    throw ModelLoadError(where +
                         ": model.blocks/embed/head name the block protocol but the module lacks " +
                         model->missing_protocol());
  }
  return model;
}

TRAINERD_REGISTER_MODEL("torchscript", LoadTorchScriptModel);

}  // namespace
}  // namespace trainerd
