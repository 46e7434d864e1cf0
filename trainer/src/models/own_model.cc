#include "trainerd/trainer/models/own_model.h"

#include <torch/torch.h>

#include <optional>

#include "models/plugin/plugin_library.h"
#include "models/torchscript/torchscript_model.h"
#include "trainerd/common/array_file.h"
#include "trainerd/common/sha256.h"
#include "trainerd/trainer/device/matmul_flops.h"
#include "trainerd/trainer/models/model.h"

namespace trainerd {

std::string ModelErrorReason(const std::exception& e) {
  const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
  std::string text = c10_error ? c10_error->what_without_backtrace() : e.what();
  while (!text.empty() && (text.back() == '\n' || text.back() == '"' || text.back() == ' ')) {
    text.pop_back();
  }
  if (text.find("Traceback of TorchScript") != std::string::npos) {
    return text.substr(text.rfind('\n') + 1);
  }
  return text.substr(0, text.find('\n'));
}

namespace {

std::string ShapeOf(const torch::Tensor& t) { return ShapeText(t.sizes().vec()); }

// Why `outputs` cannot be trained against `targets` with the model's loss ("" when they can).
std::string LossMismatch(TrainableModel& model, const torch::Tensor& outputs,
                         const torch::Tensor& targets) {
  const std::string got = ShapeOf(outputs), want = ShapeOf(targets);
  switch (model.loss().kind) {
    case LossKind::kCrossEntropy:
      if (outputs.dim() == targets.dim() + 1 &&
          outputs.sizes().slice(0, targets.dim()) == targets.sizes()) {
        return "";
      }
      return "model.loss: cross_entropy needs logits shaped like the targets " + want +
             " plus a class dimension, got " + got;
    case LossKind::kMse:
      if (outputs.sizes() == targets.sizes()) return "";
      return "model.loss: mse needs outputs shaped like the targets " + want + ", got " + got;
    case LossKind::kModule:
      try {
        model.Loss(outputs, targets);
        return "";
      } catch (const std::exception& e) {
        return "model.loss: module: " + std::string(kLossMethod) + "(outputs " + got +
               ", targets " + want + ") fails: " + ModelErrorReason(e);
      }
  }
  return "";
}

// FLOPs per sample of one forward of `samples` as `counter` saw them (x 3 for forward and
// backward), or why they are unknown.
void CountedFlops(const MatmulFlopCounter& counter, std::int64_t samples, OwnModelOptions* own) {
  if (!counter.uncounted().empty()) {
    own->flops_unknown_reason = "it runs " + *counter.uncounted().begin() +
                                ", which the count over matrix products does not cover";
  } else if (counter.flops() > 0) {
    own->counted_flops_per_sample = 3.0 * counter.flops() / static_cast<double>(samples);
  } else {
    own->flops_unknown_reason = "its forward runs no matrix product the count sees";
  }
}

// One forward of the data's first held-out sample: the outputs' last dimension into
// own->output_size and, unless the job gives FLOPs, 3 x its matrix products into
// own->counted_flops_per_sample; or why the outputs cannot be the model's.
Status ProbeOnASample(TrainableModel& model, const Dataset& data, const std::string& where,
                      OwnModelOptions* own) {
  torch::NoGradGuard no_grad;
  model.eval();
  const Batch sample = data.HeldOutSamples(0, 1, model.sample_format());
  torch::Tensor outputs;
  try {
    std::optional<MatmulFlopCounter> counter;  // FLOPs the job gives are not counted
    if (!own->flops_per_sample) counter.emplace();
    outputs = model.forward(sample.inputs);
    if (counter) CountedFlops(*counter, sample.samples, own);
  } catch (const std::exception& e) {  // c10::Error, or a JITException raised by the script
    const char* dtype = sample.inputs.scalar_type() == torch::kLong ? "int64" : "float32";
    return Status::InvalidArgument(where + ": the model fails on a sample of shape " +
                                   ShapeOf(sample.inputs) + " " + dtype +
                                   " (model.inputs): " + ModelErrorReason(e));
  }
  if (const std::string mismatch = LossMismatch(model, outputs, sample.targets);
      !mismatch.empty()) {
    return Status::InvalidArgument(where + ": " + mismatch);
  }
  own->output_size = outputs.dim() == 0 ? 1 : outputs.size(-1);
  return Status::Ok();
}

// The plugin's model built from model.options, or why not.
Result<std::shared_ptr<TrainableModel>> LoadPlugin(const ModelSpec& spec,
                                                   const std::string& origin) {
  if (Status s = LoadPluginModel(spec, origin); !s.ok()) return s;
  std::shared_ptr<TrainableModel> model;
  try {
    model = BuildPluginModel(spec);
  } catch (const std::exception& e) {
    return Status::InvalidArgument(origin + ": model.options: " + spec.plugin.options.dump() +
                                   ": the plugin cannot build its model: " + ModelErrorReason(e));
  }
  if (model->sample_format() != FormatOf(spec.own.inputs)) {
    return Status::InvalidArgument(origin + ": model.inputs: " + ToString(spec.own.inputs) +
                                   ", but the plugin model reads another sample format");
  }
  return model;
}

// Plan checkpoint_blocks of the loaded model: "all" expanded, indices checked. `no_blocks`
// says why a model has none.
Status ResolveCheckpointBlocks(const std::string& origin, const std::string& file,
                               const std::string& no_blocks, int num_blocks, PlanSpec* plan) {
  if (plan->checkpoint_all_blocks) {
    plan->checkpoint_blocks.clear();
    for (int b = 0; b < num_blocks; ++b) plan->checkpoint_blocks.push_back(b);
    plan->checkpoint_all_blocks = false;
  }
  for (const int block : plan->checkpoint_blocks) {
    if (block >= num_blocks) {
      return Status::InvalidArgument(origin + ": plan.checkpoint_blocks: expected indices below " +
                                     std::to_string(num_blocks) + " (the blocks of " + file +
                                     (num_blocks > 0 ? ")" : ", which " + no_blocks + ")") +
                                     ", got " + std::to_string(block));
    }
  }
  return Status::Ok();
}

}  // namespace

Status ResolveOwnModel(JobSpec* spec, const Dataset& data) {
  ModelSpec& m = spec->model;
  if (m.kind != ModelKind::kTorchScript && m.kind != ModelKind::kPlugin) return Status::Ok();
  const bool scripted = m.kind == ModelKind::kTorchScript;
  const std::string file = scripted ? m.torchscript.path : m.plugin.library;
  const std::string where =
      spec->source_path + (scripted ? ": model.path: " : ": model.library: ") + file;
  Result<std::shared_ptr<TrainableModel>> loaded =
      scripted ? LoadTorchScriptModel(m, spec->source_path) : LoadPlugin(m, spec->source_path);
  if (!loaded.ok()) return loaded.status();
  TrainableModel& model = **loaded;
  OwnModelOptions& own = m.own;
  own.num_blocks = model.num_blocks();
  own.has_batch_statistics = model.has_batch_statistics();
  Result<std::string> hash = Sha256File(file);
  if (!hash.ok()) return hash.status();
  own.sha256 = *hash;
  if (Status s = ResolveCheckpointBlocks(
          spec->source_path, file,
          scripted ? "has no block protocol" : "runs no block through RunBlock", own.num_blocks,
          &spec->plan);
      !s.ok()) {
    return s;
  }
  if (m.loss.kind == LossKind::kModule && !model.has_own_loss()) {
    return Status::InvalidArgument(
        where + (scripted ? ": model.loss: module needs an exported method 'loss(outputs, "
                            "targets) -> (sum, count)' (@torch.jit.export)"
                          : ": model.loss: module needs a model that overrides Loss() and "
                            "has_own_loss()"));
  }
  model.set_loss(m.loss);
  // Rows or windows the data cannot give: CheckModelFitsData says why.
  if (!data.supports(model.sample_format())) return Status::Ok();
  return ProbeOnASample(model, data, where, &own);
}

}  // namespace trainerd
