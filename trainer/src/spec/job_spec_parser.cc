#include "trainerd/trainer/spec/job_spec_parser.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "trainerd/trainer/spec/yaml_reader.h"

namespace trainerd {
namespace {

constexpr int kMaxCount = 1 << 24;

Precision PrecisionNamed(const std::string& name) {
  return name == "bf16" ? Precision::kBf16 : name == "fp16" ? Precision::kFp16 : Precision::kFp32;
}

std::filesystem::path Absolute(const std::string& file, const std::filesystem::path& base_dir) {
  std::filesystem::path p(file);
  return p.is_relative() ? (base_dir / p).lexically_normal() : p;
}

void ReadGpt(YamlReader& model, GptOptions* gpt) {
  model.Int("n_layer", &gpt->n_layer, 1, 1024);
  model.Int("n_head", &gpt->n_head, 1, 1024);
  model.Int("n_embd", &gpt->n_embd, 1, 65536);
  model.Int("block_size", &gpt->block_size, 1, 65536);
  model.Int("vocab_size", &gpt->vocab_size, 1, kMaxCount);
  model.Double("dropout", &gpt->dropout, 0.0, 0.99);
  model.Bool("bias", &gpt->bias);
  std::string kernels = "fused";
  model.String("kernels", &kernels, {"fused", "explicit"});
  gpt->kernels = kernels == "explicit" ? GptKernels::kExplicit : GptKernels::kFused;
  if (model.ok() && gpt->n_embd % gpt->n_head != 0) {
    model.Fail("n_head",
               "an integer that divides model.n_embd (" + std::to_string(gpt->n_embd) + ")",
               std::to_string(gpt->n_head));
  }
}

void ReadMlp(YamlReader& model, ModelSpec* spec) {
  MlpOptions& mlp = spec->mlp;
  model.Int("hidden", &mlp.hidden, 1, 65536);
  model.Int("layers", &mlp.layers, 1, 1024);
  model.Bool("batch_norm", &mlp.batch_norm);
  model.Double("dropout", &mlp.dropout, 0.0, 0.99);
  // The classifier reads windows of this many bytes; shared with the GPT's context length.
  model.Int("block_size", &spec->gpt.block_size, 1, 65536);
}

void ReadLoss(YamlReader& model, LossSpec* loss) {
  std::string kind = "cross_entropy";
  model.String("loss", &kind, {"cross_entropy", "mse", "module"});
  loss->kind = kind == "mse"      ? LossKind::kMse
               : kind == "module" ? LossKind::kModule
                                  : LossKind::kCrossEntropy;
  if (model.Has("ignore_index")) {
    int ignore_index = 0;
    model.Int("ignore_index", &ignore_index, -(1 << 30), 1 << 30);
    loss->ignore_index = ignore_index;
  }
}

// What the team's own model reads (by default the rows of tensors data, else tokens), its
// loss, FLOPs and window: the keys torchscript and plugin models share.
void ReadOwnModel(YamlReader& model, const DataSpec& data, ModelSpec* spec) {
  OwnModelOptions& own = spec->own;
  std::string inputs = data.format == DataFormat::kTensors ? "rows" : "tokens";
  model.String("inputs", &inputs, {"tokens", "byte_histogram", "rows"});
  own.inputs = inputs == "byte_histogram" ? ModelInputs::kByteHistogram
               : inputs == "rows"         ? ModelInputs::kRows
                                          : ModelInputs::kTokens;
  ReadLoss(model, &spec->loss);
  if (model.Has("flops_per_sample")) {
    double flops = 0;
    model.Double("flops_per_sample", &flops, 0.0, 1e30, /*min_open=*/true);
    own.flops_per_sample = flops;
  }
  // Token windows (inputs: tokens) or the window a histogram is taken over.
  model.Int("block_size", &spec->gpt.block_size, 1, 65536);
}

void ReadTorchScript(YamlReader& model, const std::filesystem::path& base_dir,
                     TorchScriptOptions* ts) {
  model.String("path", &ts->path, {});
  if (!model.Has("path")) {
    model.Fail("path", "the TorchScript file (.pt) the model was exported to", "nothing");
  }
  ts->path = Absolute(ts->path, base_dir).string();
  ts->protocol_named = model.Has("blocks") || model.Has("embed") || model.Has("head");
  model.String("blocks", &ts->blocks, {});
  model.String("embed", &ts->embed, {});
  model.String("head", &ts->head, {});
}

void ReadPlugin(YamlReader& model, const std::filesystem::path& base_dir, PluginOptions* plugin) {
  model.String("library", &plugin->library, {});
  if (!model.Has("library")) {
    model.Fail("library",
               "the plugin's shared library (.so, built with find_package(trainerd); "
               "docs/bring-your-own-model.md)",
               "nothing");
  }
  plugin->library = Absolute(plugin->library, base_dir).string();
  model.String("name", &plugin->name, {});
  model.JsonMap("options", &plugin->options);
}

void ReadModel(YamlReader model, const std::filesystem::path& base_dir, const DataSpec& data,
               ModelSpec* spec) {
  std::string kind = "gpt";
  model.String("kind", &kind, {"gpt", "mlp", "torchscript", "plugin"});
  spec->kind = kind == "mlp"           ? ModelKind::kMlpClassifier
               : kind == "torchscript" ? ModelKind::kTorchScript
               : kind == "plugin"      ? ModelKind::kPlugin
                                       : ModelKind::kGpt;
  switch (spec->kind) {
    case ModelKind::kGpt:
      ReadGpt(model, &spec->gpt);
      break;
    case ModelKind::kMlpClassifier:
      ReadMlp(model, spec);
      break;
    case ModelKind::kTorchScript:
      ReadTorchScript(model, base_dir, &spec->torchscript);
      ReadOwnModel(model, data, spec);
      break;
    case ModelKind::kPlugin:
      ReadPlugin(model, base_dir, &spec->plugin);
      ReadOwnModel(model, data, spec);
      break;
  }
  model.RejectUnknownKeys();
}

void ReadData(YamlReader data, const std::filesystem::path& base_dir, DataSpec* spec) {
  std::string format = "text";
  data.String("format", &format, {"text", "tokens", "tensors"});
  spec->format = format == "tokens"    ? DataFormat::kTokens
                 : format == "tensors" ? DataFormat::kTensors
                                       : DataFormat::kText;
  const bool tokens = spec->format == DataFormat::kTokens;
  if (spec->format == DataFormat::kText) {
    data.StringList("files", &spec->files);
    if (!data.Has("files")) data.Fail("files", "a non-empty list of text files", "nothing");
    for (auto& file : spec->files) file = Absolute(file, base_dir).string();
    data.Double("holdout_fraction", &spec->holdout_fraction, 0.0, 0.5, /*min_open=*/true);
  } else {
    const std::string split = tokens ? "token file (train.bin)"
                                     : "split (a .safetensors file or a directory of .npy files)";
    data.String("train", &spec->train, {});
    if (!data.Has("train")) data.Fail("train", "the training " + split, "nothing");
    spec->train = Absolute(spec->train, base_dir).string();
    data.StringList("eval", &spec->eval);
    if (!data.Has("eval")) data.Fail("eval", "a non-empty list of evaluation splits", "nothing");
    for (auto& file : spec->eval) file = Absolute(file, base_dir).string();
    if (tokens) {
      std::string dtype = "uint16";
      data.String("dtype", &dtype, {"uint16", "uint32"});
      spec->token_bytes = dtype == "uint32" ? 4 : 2;
    } else {
      data.String("inputs", &spec->inputs_name, {});
      data.String("targets", &spec->targets_name, {});
    }
  }
  data.Int("eval_windows_per_slice", &spec->eval_windows_per_slice, 1, 4096);
  data.RejectUnknownKeys();
}

void ReadOptimizer(YamlReader opt, OptimizerSpec* spec) {
  std::string kind = "adamw";
  opt.String("kind", &kind, {"adamw"});
  opt.Double("lr", &spec->lr, 0.0, 10.0, /*min_open=*/true);
  opt.Double("beta1", &spec->beta1, 0.0, 0.999999);
  opt.Double("beta2", &spec->beta2, 0.0, 0.999999);
  opt.Double("weight_decay", &spec->weight_decay, 0.0, 10.0);
  opt.Double("eps", &spec->eps, 0.0, 1.0, /*min_open=*/true);
  opt.RejectUnknownKeys();
}

void ReadSchedule(YamlReader schedule, const OptimizerSpec& optimizer, ScheduleSpec* spec) {
  schedule.Int("warmup_updates", &spec->warmup_updates, 0, kMaxCount);
  schedule.Double("min_lr", &spec->min_lr, 0.0, 10.0);
  if (schedule.ok() && spec->min_lr > optimizer.lr) {
    std::ostringstream lr;
    lr << optimizer.lr;
    schedule.Fail("min_lr", "a number <= optimizer.lr (" + lr.str() + ")",
                  std::to_string(spec->min_lr));
  }
  schedule.RejectUnknownKeys();
}

void ReadTraining(YamlReader training, TrainingSpec* spec) {
  training.Int("effective_batch", &spec->effective_batch, 1, kMaxCount);
  training.Int("updates", &spec->updates, 1, kMaxCount);
  training.Double("grad_clip", &spec->grad_clip, 0.0, 1e6);
  training.UInt64("seed", &spec->seed);
  training.Int("eval_interval", &spec->eval_interval, 1, kMaxCount);
  training.Int("checkpoint_interval", &spec->checkpoint_interval, 1, kMaxCount);
  training.Bool("allow_batch_norm_accumulation", &spec->allow_batch_norm_accumulation);
  training.RejectUnknownKeys();
}

// Reads the plan keys of `plan` into `spec`, validated against one rank's share of the job: a
// microbatch of at most that share, accumulation steps consistent with it, existing block
// indices.
void ReadPlan(YamlReader plan, const ModelSpec& model, const TrainingSpec& training,
              const DistributedSpec& distributed, PlanSpec* spec) {
  const int batch = ShareOfRank(training.effective_batch, distributed.ranks, 0).count;
  plan.Int("microbatch", &spec->microbatch, 1, kMaxCount);
  plan.Int("accumulation_steps", &spec->accumulation_steps, 1, kMaxCount);
  if (plan.ok() && spec->microbatch > batch) {
    plan.Fail("microbatch",
              distributed.ranks == 1
                  ? "at most training.effective_batch (" + std::to_string(batch) + ")"
                  : "at most a rank's share of training.effective_batch (" + std::to_string(batch) +
                        " of " + std::to_string(training.effective_batch) + " over " +
                        std::to_string(distributed.ranks) + " ranks)",
              std::to_string(spec->microbatch));
  }
  if (plan.ok() && spec->microbatch == 0 && spec->accumulation_steps > 0) {
    spec->microbatch = (batch + spec->accumulation_steps - 1) / spec->accumulation_steps;
  }
  if (spec->microbatch == 0) spec->microbatch = batch;
  const int steps = (batch + spec->microbatch - 1) / spec->microbatch;
  if (plan.ok() && spec->accumulation_steps != 0 && spec->accumulation_steps != steps) {
    plan.Fail("accumulation_steps",
              std::to_string(steps) + " (effective batch " + std::to_string(batch) +
                  " in microbatches of " + std::to_string(spec->microbatch) + ")",
              std::to_string(spec->accumulation_steps));
  }
  spec->accumulation_steps = steps;

  // The team's own model's blocks are counted when the worker loads it (ResolveOwnModel
  // checks the indices and expands "all" then; it fills the file's hash too).
  const bool count_known =
      (model.kind != ModelKind::kTorchScript && model.kind != ModelKind::kPlugin) ||
      !model.own.sha256.empty();
  const int blocks = NumBlocks(model);
  std::string which;
  if (plan.Has("checkpoint_blocks")) {
    std::vector<int> indices;
    plan.IntListOr("checkpoint_blocks", &indices, &which, {"all", "none"}, 0,
                   count_known ? blocks - 1 : kMaxCount);
    spec->checkpoint_all_blocks = false;
    if (which == "all") {
      indices.clear();
      for (int i = 0; i < blocks; ++i) indices.push_back(i);
      spec->checkpoint_all_blocks = !count_known;
    } else if (which == "none") {
      indices.clear();
    }
    std::sort(indices.begin(), indices.end());
    indices.erase(std::unique(indices.begin(), indices.end()), indices.end());
    spec->checkpoint_blocks = indices;
  }
  std::string precision = ToString(spec->precision);
  plan.String("precision", &precision, {"fp32", "bf16", "fp16"});
  spec->precision = PrecisionNamed(precision);
  plan.RejectUnknownKeys();
}

void ReadRuntime(YamlReader runtime, RuntimeSpec* spec) {
  runtime.IntOrAuto("threads", &spec->threads, 1, 1024);
  runtime.String("device", &spec->device, {"cpu", "cuda"});
  runtime.RejectUnknownKeys();
}

void ReadDistributed(YamlReader distributed, const TrainingSpec& training, DistributedSpec* spec) {
  distributed.Int("ranks", &spec->ranks, 1, 4096);
  if (distributed.ok() && spec->ranks > training.effective_batch) {
    distributed.Fail("ranks",
                     "at most training.effective_batch (" +
                         std::to_string(training.effective_batch) + "): every rank needs a sample",
                     std::to_string(spec->ranks));
  }
  std::string launcher = ToString(spec->launcher);
  distributed.String("launcher", &launcher, {"local", "torchrun", "slurm"});
  spec->launcher = launcher == "torchrun" ? Launcher::kTorchrun
                   : launcher == "slurm"  ? Launcher::kSlurm
                                          : Launcher::kLocal;
  distributed.DurationSeconds("timeout", &spec->timeout_seconds, 0, 86400, /*min_open=*/true);
  distributed.String("launcher_path", &spec->launcher_path, {});
  distributed.StringList("launcher_args", &spec->launcher_args);
  if (distributed.ok() && spec->launcher == Launcher::kLocal &&
      (!spec->launcher_path.empty() || !spec->launcher_args.empty())) {
    distributed.Fail(spec->launcher_path.empty() ? "launcher_args" : "launcher_path",
                     "nothing with launcher: local (trainer-launch is trainerd's own)",
                     spec->launcher_path.empty() ? "a list" : "'" + spec->launcher_path + "'");
  }
  distributed.RejectUnknownKeys();
}

void ReadPlanner(YamlReader planner, PlannerSpec* spec) {
  std::vector<std::string> names;
  planner.StringList("precisions", &names);
  if (!names.empty()) {
    spec->precisions.clear();
    for (const std::string& name : names) {
      if (name != "fp32" && name != "bf16" && name != "fp16") {
        planner.Fail("precisions", "a list of fp32, bf16, fp16", "'" + name + "'");
        return;
      }
      spec->precisions.push_back(PrecisionNamed(name));
    }
  }
  std::vector<int> probes;
  std::string unused;
  planner.IntListOr("probe_microbatches", &probes, &unused, {}, 1, kMaxCount);
  if (!probes.empty()) spec->probe_microbatches = probes;
  planner.RejectUnknownKeys();
}

void ReadMemory(YamlReader memory, MemorySpec* spec) {
  memory.Bytes("budget", &spec->budget_bytes);
  memory.Fraction("reserve", &spec->reserve_fraction, 0.0, 0.9);
  memory.RejectUnknownKeys();
}

// init_from: current_release, or a release folder or model.safetensors file.
void ReadInitFrom(YamlReader& top, const std::filesystem::path& base_dir, InitSpec* init) {
  std::string from;
  top.String("init_from", &from, {});
  if (from.empty()) return;
  init->current_release = from == kInitFromCurrentRelease;
  if (!init->current_release) init->path = Absolute(from, base_dir).string();
}

}  // namespace

Result<JobSpec> ParseJobSpecText(const std::string& yaml_text, const std::string& origin,
                                 const std::string& base_dir) {
  Result<YAML::Node> parsed = LoadYamlMapping(yaml_text, origin);
  if (!parsed.ok()) return parsed.status();
  const YAML::Node& root = *parsed;
  JobSpec spec;
  spec.source_path = origin;
  YamlReader top(root, origin, "");
  const std::filesystem::path base = base_dir.empty() ? std::filesystem::path(origin).parent_path()
                                                      : std::filesystem::path(base_dir);
  ReadData(top.Child("data"), base, &spec.data);
  ReadModel(top.Child("model"), base, spec.data, &spec.model);
  ReadOptimizer(top.Child("optimizer"), &spec.optimizer);
  ReadSchedule(top.Child("schedule"), spec.optimizer, &spec.schedule);
  ReadTraining(top.Child("training"), &spec.training);
  ReadDistributed(top.Child("distributed"), spec.training, &spec.distributed);
  spec.plan_given = top.Has("plan");
  if (top.ok()) {
    ReadPlan(top.Child("plan"), spec.model, spec.training, spec.distributed, &spec.plan);
  }
  ReadRuntime(top.Child("runtime"), &spec.runtime);
  ReadMemory(top.Child("memory"), &spec.memory);
  ReadPlanner(top.Child("planner"), &spec.planner);
  top.DurationSeconds("window", &spec.window_seconds);
  ReadInitFrom(top, base, &spec.init_from);
  top.RejectUnknownKeys();
  if (!top.ok()) return Status::InvalidArgument(top.first_error());
  return spec;
}

Result<JobSpec> ParseJobSpecFile(const std::string& path, const std::string& base_dir) {
  Result<std::string> text = ReadConfigFile(path);
  if (!text.ok()) return text.status();
  return ParseJobSpecText(*text, path, base_dir);
}

Status ApplyPlanFile(const std::string& path, JobSpec* spec) {
  Result<std::string> text = ReadConfigFile(path);
  if (!text.ok()) return text.status();
  Result<YAML::Node> root = LoadYamlMapping(*text, path);
  if (!root.ok()) return root.status();
  PlanSpec plan;
  YamlReader reader(*root, path, "");
  ReadPlan(reader, spec->model, spec->training, spec->distributed, &plan);
  if (!reader.ok()) return Status::InvalidArgument(reader.first_error());
  spec->plan = plan;
  return Status::Ok();
}

}  // namespace trainerd
