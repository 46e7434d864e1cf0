#include "trainerd/trainer/spec/job_spec_parser.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "trainerd/trainer/spec/accumulation_steps.h"
#include "trainerd/trainer/spec/data_format.h"
#include "trainerd/trainer/spec/model_kind.h"
#include "trainerd/trainer/spec/yaml_reader.h"

namespace trainerd {
namespace {

constexpr int kMaxCount = 1 << 24;

void ReadModel(YamlReader model, const std::string& base_dir, const DataSpec& data,
               ModelSpec* spec) {
  model.String("kind", &spec->kind, ModelKindNames());
  if (const ModelKind* kind = FindModelKind(spec->kind)) {
    model.Int("block_size", &spec->block_size, 1, 65536);
    const DataFormat* format = FindDataFormat(data.format);
    const ModelKeysContext context{base_dir,
                                   format ? format->DefaultInputs() : ModelInputs::kTokens};
    kind->Read(model, context, spec);
    if (format != nullptr && format->MasksTargets(data) &&
        spec->loss.kind == LossKind::kCrossEntropy && spec->loss.ignore_index != kMaskedTarget) {
      model.Fail("ignore_index",
                 std::to_string(kMaskedTarget) +
                     " (data.loss_masks and data.document_end give the targets they leave out "
                     "as -100)",
                 std::to_string(spec->loss.ignore_index));
    }
    if (format != nullptr && format->PacksDocuments(data) && !kind->KeepsDocumentsApart()) {
      model.Fail("kind",
                 "a kind that keeps packed documents apart (gpt, hf) for data.document_end, or "
                 "data.packing: false (one document per window)",
                 spec->kind);
    }
  }
  model.RejectUnknownKeys();
}

void ReadData(YamlReader data, const std::string& base_dir, DataSpec* spec) {
  data.String("format", &spec->format, DataFormatNames());
  if (const DataFormat* format = FindDataFormat(spec->format)) {
    format->Read(data, base_dir, spec);
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
// indices. *all_blocks_uncounted: checkpoint_blocks is all, of a model not counted yet.
void ReadPlan(YamlReader plan, const ModelSpec& model, const TrainingSpec& training,
              const DistributedSpec& distributed, PlanSpec* spec, bool* all_blocks_uncounted) {
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
  const int steps = AccumulationSteps(batch, spec->microbatch);
  if (plan.ok() && spec->accumulation_steps != 0 && spec->accumulation_steps != steps) {
    plan.Fail("accumulation_steps",
              std::to_string(steps) + " (effective batch " + std::to_string(batch) +
                  " in microbatches of " + std::to_string(spec->microbatch) + ")",
              std::to_string(spec->accumulation_steps));
  }
  spec->accumulation_steps = steps;

  // The team's own model's blocks are counted when the worker loads it (ResolveModel
  // checks the indices and expands "all" then; it fills the file's hash too).
  const bool count_known = BlocksKnown(model);
  const int blocks = NumBlocks(model);
  std::string which;
  if (plan.Has("checkpoint_blocks")) {
    std::vector<int> indices;
    plan.IntListOr("checkpoint_blocks", &indices, &which, {"all", "none"}, 0,
                   count_known ? blocks - 1 : kMaxCount);
    *all_blocks_uncounted = false;
    if (which == "all") {
      indices.clear();
      for (int i = 0; i < blocks; ++i) indices.push_back(i);
      *all_blocks_uncounted = !count_known;
    } else if (which == "none") {
      indices.clear();
    }
    std::sort(indices.begin(), indices.end());
    indices.erase(std::unique(indices.begin(), indices.end()), indices.end());
    spec->checkpoint_blocks = indices;
  }
  std::string precision = ToString(spec->precision);
  plan.String("precision", &precision, kPrecisionNames.Names());
  spec->precision = kPrecisionNames.Parse(precision).value_or(spec->precision);
  std::string placement = ToString(spec->optimizer_state);
  plan.String("optimizer_state", &placement, kStatePlacementNames.Names());
  spec->optimizer_state = kStatePlacementNames.Parse(placement).value_or(spec->optimizer_state);
  plan.Int("zero_stage", &spec->zero_stage, 0, 2);
  if (plan.ok() && spec->zero_stage > 0 && distributed.ranks == 1) {
    plan.Fail("zero_stage",
              "0 with distributed.ranks 1 (ZeRO shards the model's state over data-parallel "
              "ranks)",
              std::to_string(spec->zero_stage));
  }
  if (plan.ok() && spec->zero_stage > 0 && spec->optimizer_state == StatePlacement::kHost) {
    plan.Fail("zero_stage",
              "0 with optimizer_state: host (the optimizer state is either on the host or "
              "sharded over the ranks' devices)",
              std::to_string(spec->zero_stage));
  }
  plan.Int("output_chunk", &spec->output_chunk, 0, 1 << 30);
  plan.Bool("step_in_backward", &spec->step_in_backward);
  if (plan.ok() && spec->step_in_backward) {
    if (const auto refusal = StepInBackwardRefusal(*spec, model, distributed)) {
      plan.Fail("step_in_backward", *refusal, "true");
    }
  }
  plan.Bool("offload_activations", &spec->offload_activations);
  plan.RejectUnknownKeys();
}

// The plan's keys that depend on where the job runs, once runtime and memory are read.
void CheckPlanPlacement(YamlReader plan, const JobSpec& job) {
  if (!job.plan.offload_activations) return;
  if (const auto refusal = OffloadActivationsRefusal(job)) {
    plan.Fail("offload_activations", *refusal, "true");
  }
}

void ReadRuntime(YamlReader runtime, RuntimeSpec* spec) {
  runtime.IntOrAuto("threads", &spec->threads, 1, 1024);
  runtime.String("device", &spec->device, {"cpu", "cuda"});
  runtime.Bool("fix_blas_core", &spec->fix_blas_core);
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
  distributed.String("launcher", &launcher, kLauncherNames.Names());
  spec->launcher = kLauncherNames.Parse(launcher).value_or(spec->launcher);
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
      const std::optional<Precision> precision = kPrecisionNames.Parse(name);
      if (!precision) {
        planner.Fail("precisions", "a list of fp32, bf16, fp16", "'" + name + "'");
        return;
      }
      spec->precisions.push_back(*precision);
    }
  }
  names.clear();
  planner.StringList("optimizer_states", &names);
  if (!names.empty()) {
    spec->optimizer_states.clear();
    for (const std::string& name : names) {
      const std::optional<StatePlacement> placement = kStatePlacementNames.Parse(name);
      if (!placement) {
        planner.Fail("optimizer_states", "a list of device, host", "'" + name + "'");
        return;
      }
      spec->optimizer_states.push_back(*placement);
    }
    if (std::find(spec->optimizer_states.begin(), spec->optimizer_states.end(),
                  StatePlacement::kDevice) == spec->optimizer_states.end()) {
      planner.Fail("optimizer_states",
                   "a list that includes device (plan: {optimizer_state: host} forces the host)",
                   "[host]");
      return;
    }
  }
  std::vector<int> stages;
  std::string unused;
  planner.IntListOr("zero_stages", &stages, &unused, {}, 0, 2);
  if (!stages.empty()) {
    if (std::find(stages.begin(), stages.end(), 0) == stages.end()) {
      planner.Fail("zero_stages", "a list that includes 0 (plan: {zero_stage: N} forces a stage)",
                   "a list without 0");
      return;
    }
    spec->zero_stages = stages;
  }
  std::vector<int> probes;
  planner.IntListOr("probe_microbatches", &probes, &unused, {}, 1, kMaxCount);
  if (!probes.empty()) spec->probe_microbatches = probes;
  planner.RejectUnknownKeys();
}

void ReadMemory(YamlReader memory, const RuntimeSpec& runtime, MemorySpec* spec) {
  memory.Bytes("budget", &spec->budget_bytes);
  memory.Fraction("reserve", &spec->reserve_fraction, 0.0, 0.9);
  memory.Bytes("host_budget", &spec->host_budget_bytes);
  memory.Bool("simulated_device", &spec->simulated_device);
  if (memory.ok() && spec->simulated_device && runtime.device != "cpu") {
    memory.Fail("simulated_device",
                "false with runtime.device " + runtime.device +
                    " (the CPU simulates an accelerator; a real one is not simulated)",
                "true");
  }
  memory.RejectUnknownKeys();
}

void ReadFinetune(YamlReader finetune, FinetuneSpec* spec) {
  std::string method = ToString(spec->method);
  finetune.String("method", &method, kFinetuneMethodNames.Names());
  spec->method = kFinetuneMethodNames.Parse(method).value_or(spec->method);
  if (spec->method == FinetuneMethod::kFull) {
    for (const char* key : {"rank", "alpha", "dropout", "base_dtype", "targets"}) {
      if (finetune.Has(key))
        finetune.Fail(key, "nothing with method: full (adapters' key)", "a value");
    }
    finetune.RejectUnknownKeys();
    return;
  }
  finetune.Int("rank", &spec->rank, 1, 65536);
  finetune.Double("alpha", &spec->alpha, 0.0, 1e6, /*min_open=*/true);
  finetune.Fraction("dropout", &spec->dropout, 0.0, 0.99);
  std::string base = ToString(spec->base_dtype);
  finetune.String("base_dtype", &base, {"fp32", "bf16"});
  spec->base_dtype = kPrecisionNames.Parse(base).value_or(spec->base_dtype);
  finetune.StringList("targets", &spec->targets);
  if (finetune.ok() && spec->targets.empty()) {
    finetune.Fail("targets", "the names of the linear layers to adapt (q_proj, v_proj, ...)",
                  "none");
  }
  finetune.RejectUnknownKeys();
}

// init_from: current_release, or a release folder or model.safetensors file.
void ReadInitFrom(YamlReader& top, const std::string& base_dir, InitSpec* init) {
  std::string from;
  top.String("init_from", &from, {});
  if (from.empty()) return;
  init->current_release = from == kInitFromCurrentRelease;
  if (!init->current_release) init->path = AbsolutePath(from, base_dir);
}

// ParseJobSpecText without its guard.
Result<JobSpec> ReadJobSpec(const std::string& yaml_text, const std::string& origin,
                            const std::string& base_dir) {
  Result<YAML::Node> parsed = LoadYamlMapping(yaml_text, origin);
  if (!parsed.ok()) return parsed.status();
  const YAML::Node& root = *parsed;
  JobSpec spec;
  spec.source_path = origin;
  YamlReader top(root, origin, "");
  const std::string base =
      base_dir.empty() ? std::filesystem::path(origin).parent_path().string() : base_dir;
  ReadData(top.Child("data"), base, &spec.data);
  ReadModel(top.Child("model"), base, spec.data, &spec.model);
  ReadFinetune(top.Child("finetune"), &spec.finetune);
  ReadOptimizer(top.Child("optimizer"), &spec.optimizer);
  ReadSchedule(top.Child("schedule"), spec.optimizer, &spec.schedule);
  ReadTraining(top.Child("training"), &spec.training);
  ReadDistributed(top.Child("distributed"), spec.training, &spec.distributed);
  spec.plan_given = top.Has("plan");
  if (top.ok()) {
    ReadPlan(top.Child("plan"), spec.model, spec.training, spec.distributed, &spec.plan,
             &spec.plan_checkpoints_all_blocks);
  }
  ReadRuntime(top.Child("runtime"), &spec.runtime);
  ReadMemory(top.Child("memory"), spec.runtime, &spec.memory);
  ReadPlanner(top.Child("planner"), &spec.planner);
  if (top.ok()) CheckPlanPlacement(top.Child("plan"), spec);
  top.DurationSeconds("window", &spec.window_seconds);
  ReadInitFrom(top, base, &spec.init_from);
  top.RejectUnknownKeys();
  if (!top.ok()) return Status::InvalidArgument(top.first_error());
  return spec;
}

}  // namespace

Result<JobSpec> ParseJobSpecText(const std::string& yaml_text, const std::string& origin,
                                 const std::string& base_dir) {
  // The files a model kind reads beside the spec (a Hugging Face folder's config.json) come
  // from outside: whatever a reader of them throws is an invalid spec, never a dead caller.
  try {
    return ReadJobSpec(yaml_text, origin, base_dir);
  } catch (const std::exception& e) {
    return Status::InvalidArgument(origin + ": " + e.what());
  }
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
  bool all_blocks_uncounted = false;
  ReadPlan(reader, spec->model, spec->training, spec->distributed, &plan, &all_blocks_uncounted);
  JobSpec planned = *spec;
  planned.plan = plan;
  if (reader.ok()) CheckPlanPlacement(reader, planned);
  if (!reader.ok()) return Status::InvalidArgument(reader.first_error());
  spec->plan = plan;
  return Status::Ok();
}

}  // namespace trainerd
