#include "trainerd/trainer/models/resolve_model.h"

#include <torch/torch.h>

#include <optional>

#include "trainerd/common/array_file.h"
#include "trainerd/trainer/device/device_memory.h"
#include "trainerd/trainer/device/matmul_flops.h"
#include "trainerd/trainer/models/adapters.h"
#include "trainerd/trainer/models/build_model.h"
#include "trainerd/trainer/models/model_registry.h"
#include "trainerd/trainer/semantics/document_positions.h"
#include "trainerd/trainer/spec/data_format.h"
#include "trainerd/trainer/spec/model_kind.h"

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

// "model.path: /x/lm.pt" for the team's own model, "model.kind: gpt" for a built-in one: what
// an error about the model names.
std::string ModelKey(const ModelSpec& spec) {
  const std::string file_key = ModelKindOf(spec).FileKey();
  if (file_key.empty()) return "model.kind: " + spec.kind;
  return "model." + file_key + ": " + spec.options.value(file_key, std::string());
}

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
        return "model.loss: module: loss(outputs " + got + ", targets " + want +
               ") fails: " + ModelErrorReason(e);
      }
  }
  return "";
}

// FLOPs per sample of one forward of `samples` as `counter` saw them (x 3 for forward and
// backward), or why they are unknown.
void CountedFlops(const MatmulFlopCounter& counter, std::int64_t samples, LoadedModel* loaded) {
  if (!counter.uncounted().empty()) {
    loaded->flops_unknown_reason = "it runs " + *counter.uncounted().begin() +
                                   ", which the count over matrix products does not cover";
  } else if (counter.flops() > 0) {
    loaded->counted_flops_per_sample = 3.0 * counter.flops() / static_cast<double>(samples);
  } else {
    loaded->flops_unknown_reason = "its forward runs no matrix product the count sees";
  }
}

// One forward of the data's first held-out sample: the outputs' last dimension into
// loaded->output_size and, when `count_flops`, 3 x its matrix products into
// loaded->counted_flops_per_sample; or why the outputs cannot be the model's.
Status ProbeOnASample(TrainableModel& model, const Dataset& data, const std::string& where,
                      bool count_flops, LoadedModel* loaded) {
  torch::NoGradGuard no_grad;
  const OutOfMemoryWatch out_of_memory;
  model.eval();
  const Batch sample = data.HeldOutSamples(0, 1, model.sample_format());
  torch::Tensor outputs;
  try {
    std::optional<MatmulFlopCounter> counter;
    if (count_flops) counter.emplace();
    const DocumentPositionsScope documents(sample.positions);
    outputs = model.forward(sample.inputs);
    if (counter) CountedFlops(*counter, sample.samples, loaded);
  } catch (const std::exception& e) {  // c10::Error, or a JITException raised by the script
    const char* dtype = sample.inputs.scalar_type() == torch::kLong ? "int64" : "float32";
    const std::string run = " on a sample of shape " + ShapeOf(sample.inputs) + " " + dtype +
                            " (model.inputs): " + ModelErrorReason(e);
    if (out_of_memory.IsOutOfMemory(e)) {
      return Status::OutOfMemory(where + ": out of memory running the model" + run);
    }
    return Status::InvalidArgument(where + ": the model fails" + run);
  }
  if (const std::string mismatch = LossMismatch(model, outputs, sample.targets);
      !mismatch.empty()) {
    return Status::InvalidArgument(where + ": " + mismatch);
  }
  loaded->output_size = outputs.dim() == 0 ? 1 : outputs.size(-1);
  return Status::Ok();
}

// Plan checkpoint_blocks of the built model: "all" expanded, indices checked. `blocks_note`
// is why a model has none to checkpoint.
Status ResolveCheckpointBlocks(const std::string& model_key, const std::string& blocks_note,
                               int num_blocks, JobSpec* spec) {
  const std::string& origin = spec->source_path;
  PlanSpec* plan = &spec->plan;
  if (spec->plan_checkpoints_all_blocks) {
    plan->checkpoint_blocks.clear();
    for (int b = 0; b < num_blocks; ++b) plan->checkpoint_blocks.push_back(b);
    spec->plan_checkpoints_all_blocks = false;
  }
  for (const int block : plan->checkpoint_blocks) {
    if (block >= num_blocks) {
      return Status::InvalidArgument(origin + ": plan.checkpoint_blocks: expected indices below " +
                                     std::to_string(num_blocks) + " (the blocks of " + model_key +
                                     (blocks_note.empty()
                                          ? ", which runs no block through RunBlock)"
                                          : ": " + blocks_note + ")") +
                                     ", got " + std::to_string(block));
    }
  }
  return Status::Ok();
}

}  // namespace

Status ResolveModel(JobSpec* spec, const Dataset& data) {
  ModelSpec& m = spec->model;
  const ModelKind& kind = ModelKindOf(m);
  const std::string& origin = spec->source_path;
  const std::string where = origin + ": " + ModelKey(m);
  // A model built on the CPU to learn its blocks and outputs, and one sample through it: not
  // the training's memory, so outside any budget (it is gone before training starts).
  const ScopedMemoryLimit outside_the_budget(MemoryOf(torch::kCPU), 0);
  std::shared_ptr<TrainableModel> model;
  try {
    model = BuildModel(m, static_cast<int>(data.slices().size()), origin);
  } catch (const ModelLoadError& e) {
    return Status::InvalidArgument(e.what());
  } catch (const std::exception& e) {
    return Status::InvalidArgument(origin + ": model: " + m.options.dump() +
                                   ": the model cannot be built: " + ModelErrorReason(e));
  }
  if (Status s = AttachAdapters(*spec, model.get()); !s.ok()) return s;
  LoadedModel loaded;
  loaded.blocks = model->num_blocks();
  loaded.batch_statistics = model->has_batch_statistics();
  if (loaded.batch_statistics && spec->distributed.ranks > 1) {
    return Status::InvalidArgument(
        where + ": the model normalises over its batch (BatchNorm), and with distributed.ranks: " +
        std::to_string(spec->distributed.ranks) +
        " each rank would normalise over its own share and keep its own running statistics, "
        "never synchronised (rank 0's would be released): another job than the one-process "
        "job. Train it with distributed.ranks: 1");
  }
  if (const std::string file_key = kind.FileKey(); !file_key.empty()) {
    Result<std::string> hash = kind.ContentSha256(m.options.value(file_key, std::string()));
    if (!hash.ok()) return hash.status();
    loaded.file_sha256 = *hash;
  }
  if (Status s = ResolveCheckpointBlocks(ModelKey(m), model->blocks_note(), loaded.blocks, spec);
      !s.ok()) {
    return s;
  }
  if (m.loss.kind == LossKind::kModule && !model->has_own_loss()) {
    return Status::InvalidArgument(where + ": model.loss: module needs " + kind.OwnLossHint());
  }
  // Rows or windows the data cannot give: CheckModelFitsData says why. A kind that declares
  // its outputs is checked against the data before anything runs on it.
  if (data.supports(model->sample_format()) && !kind.Outputs(m)) {
    const bool count_flops = !m.flops_per_sample && !model->TrainingFlops();
    if (Status s = ProbeOnASample(*model, data, where, count_flops, &loaded); !s.ok()) return s;
  }
  m.loaded = loaded;
  return Status::Ok();
}

namespace {

std::string Joined(const std::vector<std::string>& names) {
  std::string joined;
  for (const std::string& name : names) joined += (joined.empty() ? "" : " or ") + name;
  return joined;
}

// The data formats whose data a model reading `inputs` can read.
std::string FormatsGiving(ModelInputs inputs) {
  std::vector<std::string> names;
  for (const std::string& name : DataFormatNames()) {
    const std::vector<ModelInputs> gives = FindDataFormat(name)->Gives();
    if (std::find(gives.begin(), gives.end(), inputs) != gives.end()) names.push_back(name);
  }
  return Joined(names);
}

// The model kinds whose model is the team's own and reads what model.inputs says.
std::string OwnModelKinds() {
  std::vector<std::string> names;
  for (const std::string& name : ModelKindNames()) {
    if (FindModelKind(name)->ReadsModelInputs()) names.push_back(name);
  }
  return Joined(names);
}

// Why a model of `spec` cannot read data that lacks what it reads, and what to change.
std::string FormatMismatch(const ModelSpec& spec, const Dataset& data) {
  const bool own = ModelKindOf(spec).ReadsModelInputs();
  const std::string reader =
      own ? std::string("model.inputs: ") + ToString(spec.inputs) : "model.kind: " + spec.kind;
  const std::string rows = FormatsGiving(ModelInputs::kRows);
  if (data.supports(SampleFormat::kRows)) {
    return own ? "data.format: " + rows + " gives rows, not what " + reader +
                     " reads; use model.inputs: rows (the default for " + rows + " data)"
               : "data.format: " + rows + " needs model.kind: " + OwnModelKinds() +
                     " (a model that reads rows); " + reader + " reads text or token windows";
  }
  if (spec.inputs == ModelInputs::kRows) {
    return reader + " reads the rows of data.format: " + rows + "; this data gives windows";
  }
  return reader +
         " counts the bytes of text windows, but this data gives token ids; use data.format: " +
         FormatsGiving(ModelInputs::kByteHistogram);
}

}  // namespace

Status CheckModelFitsData(const ModelSpec& spec, const std::string& origin, const Dataset& data) {
  const SampleFormat reads = SampleFormatOf(spec.inputs);
  if (!data.supports(reads)) {
    return Status::InvalidArgument(origin + ": " + FormatMismatch(spec, data));
  }
  const auto needs = [&](const std::string& key, std::int64_t have, std::int64_t need,
                         const std::string& what) -> Status {
    if (have >= need) return Status::Ok();
    return Status::InvalidArgument(origin + ": " + key + ": " + what + " " + std::to_string(need) +
                                   ", got " + std::to_string(have));
  };
  const std::int64_t largest = data.vocabulary_needed() - 1;
  const std::string ids =
      "the data's token ids go up to " + std::to_string(largest) + ": expected at least";
  if (const std::optional<ModelKind::DeclaredOutputs> declared = ModelKindOf(spec).Outputs(spec)) {
    return reads == SampleFormat::kNextToken
               ? needs("model." + declared->key, declared->size, data.vocabulary_needed(), ids)
               : Status::Ok();
  }
  if (!spec.loaded || spec.loaded->output_size == 0) return Status::Ok();  // not run on a sample
  const std::int64_t outputs = spec.loaded->output_size;
  const std::string key = "model." + ModelKindOf(spec).FileKey();
  switch (reads) {
    case SampleFormat::kNextToken:
      return needs(key, outputs, data.vocabulary_needed(),
                   "the model's logits cover its vocabulary, and " + ids);
    case SampleFormat::kSliceOfWindow:
      return needs(key, outputs, static_cast<std::int64_t>(data.slices().size()),
                   "classifier logits need one class per data file: expected at least");
    case SampleFormat::kRows:  // mse and a module's loss: shapes checked on a sample
      if (spec.loss.kind != LossKind::kCrossEntropy) return Status::Ok();
      return needs(key, outputs, data.vocabulary_needed(),
                   "the data's class targets go up to " + std::to_string(largest) +
                       ": expected logits [B, C] with C at least");
  }
  return Status::Ok();
}

std::int64_t ModelVocabulary(const ModelSpec& spec, const Dataset& data) {
  const SampleFormat reads = SampleFormatOf(spec.inputs);
  const bool ids = reads == SampleFormat::kNextToken ||
                   (reads == SampleFormat::kRows && spec.loss.kind == LossKind::kCrossEntropy);
  if (!ids || !data.supports(reads)) return 0;
  if (const std::optional<ModelKind::DeclaredOutputs> declared = ModelKindOf(spec).Outputs(spec)) {
    return reads == SampleFormat::kNextToken ? declared->size : 0;
  }
  return spec.loaded ? spec.loaded->output_size : 0;
}

}  // namespace trainerd
