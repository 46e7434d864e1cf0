// The job spec: what is trained (model, data, optimizer, schedule, batch, updates) and the
// plan it is trained with. Parsed from YAML by ParseJobSpec (job_spec_parser.h); plain data,
// no torch, so the daemon can read it too.
#pragma once

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "trainerd/common/enum_names.h"

namespace trainerd {

// JSON of an enum through its names table: the value's name, and back (throwing on a name the
// table lacks). For the enums of a kind's options (spec/model_kind.h).
#define TRAINERD_JSON_ENUM(Enum, names)                                             \
  inline void to_json(nlohmann::json& j, Enum value) { j = (names).Name(value); }   \
  inline void from_json(const nlohmann::json& j, Enum& value) {                     \
    const auto parsed = (names).Parse(j.get<std::string>());                        \
    if (!parsed) throw std::invalid_argument(#Enum ": no value named " + j.dump()); \
    value = *parsed;                                                                \
  }

// What a model reads: next-token windows of token ids (GPT-like, logits [B, T, V]), the
// byte histogram of a text window with its slice as the class (classifier, logits [B, C]), or
// the rows of data.format: tensors as they are (outputs shaped for model.loss).
enum class ModelInputs { kTokens, kByteHistogram, kRows };
inline constexpr EnumNames<ModelInputs, 3> kModelInputsNames{{{
    {ModelInputs::kTokens, "tokens"},
    {ModelInputs::kByteHistogram, "byte_histogram"},
    {ModelInputs::kRows, "rows"},
}}};

// What the outputs are trained against (loss.h): cross-entropy of logits against class ids
// (targets equal to ignore_index carry no loss), squared error against targets of the
// outputs' shape, or the model's own loss (a TorchScript module's exported `loss(outputs,
// targets) -> (sum, count)`, a plugin's Loss). Every loss is a sum divided by the term count
// of the whole effective batch.
enum class LossKind { kCrossEntropy, kMse, kModule };
inline constexpr EnumNames<LossKind, 3> kLossKindNames{{{
    {LossKind::kCrossEntropy, "cross_entropy"},
    {LossKind::kMse, "mse"},
    {LossKind::kModule, "module"},
}}};

struct LossSpec {
  LossKind kind = LossKind::kCrossEntropy;
  std::int64_t ignore_index = -100;  // cross_entropy; PyTorch's default
};

// What only the loaded model tells, filled by ResolveModel (models/resolve_model.h) in the
// worker before the plan is read or chosen.
struct LoadedModel {
  int blocks = 0;                 // blocks a plan may checkpoint
  bool batch_statistics = false;  // a layer normalises over its microbatch (BatchNorm)
  std::string file_sha256;        // of the file the model is loaded from; "" for a built-in
  // The outputs' last dimension on a sample of the data: vocabulary or classes; 0 when the
  // model was not run on one (its kind declares its outputs).
  std::int64_t output_size = 0;
  // Without model.flops_per_sample, for a model that does not count its own FLOPs: 3 x the
  // matrix products of one forward on a sample (matmul_flops.h), or none and why.
  std::optional<double> counted_flops_per_sample;
  std::string flops_unknown_reason;
};

// The model: a registered model kind (model_kind.h: gpt, mlp, torchscript, plugin, ...) with
// the keys of its `model:` section, and the keys every kind shares.
struct ModelSpec {
  std::string kind = "gpt";
  // The kind's own keys as its reader read them, every default filled in: what its model is
  // built from, what model.json describes and, less the kind's NonIdentityKeys, what the job
  // identity hashes. Empty: every default.
  nlohmann::json options = nlohmann::json::object();
  int block_size = 128;  // tokens in a window: the context of token inputs, a histogram's window
  // What the model reads: fixed by a built-in kind, model.inputs for the team's own model.
  ModelInputs inputs = ModelInputs::kTokens;
  LossSpec loss;                           // the built-in kinds train with cross_entropy
  std::optional<double> flops_per_sample;  // forward + backward, given by the job
  std::optional<LoadedModel> loaded;       // empty until ResolveModel; always in the daemon
};

// The data: a registered format (data_format.h: text, tokens, tensors, ...) with the keys of
// its `data:` section.
struct DataSpec {
  std::string format = "text";
  // The format's own keys as its reader read them (paths absolute), every default filled in.
  nlohmann::json options = nlohmann::json::object();
  int eval_windows_per_slice = 16;  // held-out windows evaluated per slice
};

struct OptimizerSpec {  // AdamW
  double lr = 3e-3;     // peak learning rate
  double beta1 = 0.9;
  double beta2 = 0.95;
  double weight_decay = 0.1;
  double eps = 1e-8;
};

struct ScheduleSpec {  // linear warmup then cosine decay, counted in optimizer updates
  int warmup_updates = 10;
  double min_lr = 3e-4;  // learning rate reached at the last update
};

enum class Precision {
  kFp32,  // fp32 everywhere
  kBf16,  // autocast to bf16; fp32 master weights and optimizer state
  kFp16,  // autocast to fp16 where the device has it (CUDA), dynamic loss scaling always
};
inline constexpr EnumNames<Precision, 3> kPrecisionNames{{{
    {Precision::kFp32, "fp32"},
    {Precision::kBf16, "bf16"},
    {Precision::kFp16, "fp16"},
}}};

// Where AdamW's state and the fp32 master weights live (docs/model-state.md). kHost: the
// device keeps the weights and gradients; after an update's last microbatch the gradients go
// to host memory, the unscale, clip and step run there, and the updated weights come back.
// The same arithmetic on the same values: a placement, not another job.
enum class StatePlacement {
  kDevice,
  kHost,
};
inline constexpr EnumNames<StatePlacement, 2> kStatePlacementNames{{{
    {StatePlacement::kDevice, "device"},
    {StatePlacement::kHost, "host"},
}}};

// How a job is executed. A plan never changes the job: same effective batch, same mean-loss
// gradient, same number of optimizer updates, same learning-rate schedule.
struct PlanSpec {
  int microbatch = 0;          // samples per forward/backward; 0 = effective batch
  int accumulation_steps = 0;  // microbatches per update: ceil(effective_batch / microbatch)
  std::vector<int> checkpoint_blocks;  // sorted indices of blocks recomputed in backward
  Precision precision = Precision::kFp32;
  StatePlacement optimizer_state = StatePlacement::kDevice;
  // ZeRO's stages over the data-parallel ranks (docs/model-state.md): 0 none; 1 each rank
  // keeps AdamW's state of its shard of the parameters only, steps that shard and broadcasts
  // it; 2 also each gradient only on the rank that owns its parameter, summed there after
  // every microbatch. Needs distributed.ranks > 1 and the optimizer state on the device.
  int zero_stage = 0;
  // A next-token model's output layer and its cross-entropy over this many positions at a
  // time, each chunk's logits recomputed in the backward (0: all the microbatch's positions
  // at once). The [microbatch, T, vocab] logits are never held, in training or evaluation;
  // the loss and gradients equal the unchunked ones up to fp32 rounding
  // (semantics/output_chunks.h). Models without an output layer ignore it.
  int output_chunk = 0;
  // Each parameter stepped by AdamW as soon as its gradient is complete in the backward, and
  // its gradient freed, so that the update's gradients are never all alive at once
  // (docs/model-state.md, "The step inside the backward"). The same update, exactly: only
  // for an update of one microbatch on one rank, the state on the device, not fp16, a loss
  // that knows its count (StepInBackwardRefusal); with training.grad_clip a first
  // forward and backward measures the global norm, the second steps with its clip.
  bool step_in_backward = false;
  // Every block not checkpointed keeps the tensors its forward saves for the backward in host
  // memory, each copied back to the device when the backward needs it (on CUDA the copies out
  // run on a stream of their own, beside the forward's kernels): the blocks' activations
  // leave the device, at the cost of moving them twice (docs/model-state.md, "Activations in
  // host memory"). The same update, exactly. Not where the host is the device
  // (OffloadActivationsRefusal).
  bool offload_activations = false;

  // Written out: plugins compile this header as C++17 (cmake/trainerdConfig.cmake.in).
  bool operator==(const PlanSpec& other) const {
    return microbatch == other.microbatch && accumulation_steps == other.accumulation_steps &&
           checkpoint_blocks == other.checkpoint_blocks && precision == other.precision &&
           optimizer_state == other.optimizer_state && zero_stage == other.zero_stage &&
           output_chunk == other.output_chunk && step_in_backward == other.step_in_backward &&
           offload_activations == other.offload_activations;
  }
};

struct TrainingSpec {
  int effective_batch = 32;  // samples per optimizer update
  int updates = 200;         // optimizer updates in the job
  double grad_clip = 1.0;    // global L2 norm; 0 disables clipping
  std::uint64_t seed = 1234;
  int eval_interval = 50;        // updates between evaluations; the last update always evaluates
  int checkpoint_interval = 50;  // updates between training checkpoints
  // A model that normalises over each microbatch (BatchNorm) computes another job when its
  // batch is split: the planner chooses accumulation for it only when this is true.
  bool allow_batch_norm_accumulation = false;
};

struct PlannerSpec {
  std::vector<Precision> precisions = {Precision::kFp32, Precision::kBf16};  // allowed
  std::vector<int> probe_microbatches = {1, 2, 4};  // microbatches measured by the probe
  // Where the planner may keep the optimizer state (docs/model-state.md): [device] keeps it
  // off the host whatever the budget.
  std::vector<StatePlacement> optimizer_states = {StatePlacement::kDevice, StatePlacement::kHost};
  // The ZeRO stages the planner may give a job of more than one rank (PlanSpec::zero_stage):
  // [0] never shards.
  std::vector<int> zero_stages = {0, 1};
};

struct RuntimeSpec {
  int threads = 0;             // intra-op threads; 0 = auto (the CPUs this process may use)
  std::string device = "cpu";  // "cpu" or "cuda" (where LibTorch has CUDA)
  // Where OpenBLAS chose kernels below the CPU's instruction set, restart the worker with
  // OPENBLAS_CORETYPE naming the CPU's core once its product passes a check
  // (device/blas_core_fix.h).
  bool fix_blas_core = true;
};

// Data-parallel training (docs/distributed.md): `ranks` processes train the job together, each
// on its share of every update's effective batch (contiguous; the first effective_batch % ranks
// ranks get one sample more), with gradients summed over c10d (Gloo on CPUs, NCCL on GPUs)
// once per update. The plan is per rank: its microbatch and accumulation cover the largest
// share. N ranks compute the one-rank job; only the launch differs.
enum class Launcher {
  kLocal,     // trainer-launch starts the ranks as children on this host
  kTorchrun,  // torchrun --no-python --nproc-per-node=ranks
  kSlurm,     // srun --ntasks=ranks, inside the job's allocation
};
inline constexpr EnumNames<Launcher, 3> kLauncherNames{{{
    {Launcher::kLocal, "local"},
    {Launcher::kTorchrun, "torchrun"},
    {Launcher::kSlurm, "slurm"},
}}};

struct DistributedSpec {
  int ranks = 1;
  // The whole job's ranks in a RankJob (whose `ranks` is 1): what a plan with zero_stage > 0
  // divides the model's state by in one rank's ledger and the planner's predictions.
  int job_ranks = 1;
  Launcher launcher = Launcher::kLocal;
  // A rank that waits longer than this for the others (joining, a collective) fails; after a
  // rank fails, the launcher stops the others and kills those still running this much later.
  // It must cover the longest stretch rank 0 works alone: an evaluation and a checkpoint.
  double timeout_seconds = 300;
  std::string launcher_path;               // torchrun / srun executable; "" = found on PATH
  std::vector<std::string> launcher_args;  // more arguments for torchrun / srun
};

// Samples [offset, offset + count) of an update's effective batch are rank `rank`'s.
struct RankShare {
  int offset = 0;
  int count = 0;
};
RankShare ShareOfRank(int effective_batch, int ranks, int rank);

struct MemorySpec {
  std::int64_t budget_bytes = 24LL << 30;  // device memory the job may use
  double reserve_fraction = 0.10;          // kept free for fragmentation and the runtime
  // Host memory a plan may fill with model state (StatePlacement::kHost); 0: what the host
  // has available when the job starts (MemAvailable).
  std::int64_t host_budget_bytes = 0;
  // The CPU stands in for an accelerator of budget_bytes (tests and demos): memory a plan
  // keeps "on the host" is outside the budget, as beside a GPU. Without it the host is the
  // CPU device (HostIsTheDevice). runtime.device cpu only.
  bool simulated_device = false;
  std::int64_t usable_bytes() const {
    return static_cast<std::int64_t>(static_cast<double>(budget_bytes) * (1.0 - reserve_fraction));
  }
};

// What a job's weights start from (init_from): their random initialisation (neither set), the
// daemon's current release (most nightly jobs continue training), or a release folder or its
// model.safetensors. trainer-run is given the file (--init-from) and loads it strictly: every
// tensor of the model, by its state_dict name and shape (initial_weights.h).
inline constexpr char kInitFromCurrentRelease[] = "current_release";
struct InitSpec {
  bool current_release = false;  // the daemon resolves it to its current release's weights
  std::string path;              // a release folder or .safetensors file, absolute
  std::string sha256;            // of the weights file: filled by trainer-run before training
};

// What a job trains of its model (finetune:; docs/model-state.md). kFull: every parameter.
// kLora: the model's own parameters frozen, and low-rank adapters (LoRA, as the `peft` package
// defines them) trained on the linear layers `targets` names: each such layer computes
// W x + b + (alpha / rank) B A dropout(x), with A [rank, in] and B [out, rank] starting at
// zero. A job, not a plan: the planner never switches to it.
enum class FinetuneMethod {
  kFull,
  kLora,
};
inline constexpr EnumNames<FinetuneMethod, 2> kFinetuneMethodNames{{{
    {FinetuneMethod::kFull, "full"},
    {FinetuneMethod::kLora, "lora"},
}}};
struct FinetuneSpec {
  FinetuneMethod method = FinetuneMethod::kFull;
  int rank = 8;
  double alpha = 16;
  double dropout = 0;  // on the adapters' input, split-invariant like the model's
  // How the frozen linear layers' weights are stored: fp32, or bf16 (half the bytes, and no
  // cast copy under a bf16 plan; every plan computes with the same rounded weights).
  Precision base_dtype = Precision::kFp32;
  // Layer names as peft matches them: a layer's dotted path or its last parts ("q_proj",
  // "mlp.0"), in the order given.
  std::vector<std::string> targets;
};
// peft's target_modules rule: `target` names the module at dotted `path` when it is the path,
// or the path ends with "." + target.
bool TargetNamesModule(const std::string& target, const std::string& path);

struct JobSpec {
  std::string source_path;  // the YAML file it came from
  ModelSpec model;
  FinetuneSpec finetune;
  DataSpec data;
  OptimizerSpec optimizer;
  ScheduleSpec schedule;
  TrainingSpec training;
  PlanSpec plan;
  bool plan_given = false;  // the YAML has a `plan:` section (a plan forced by the author)
  // plan.checkpoint_blocks: all for a model whose blocks are counted when the worker loads it
  // (torchscript, plugin): ResolveModel fills plan.checkpoint_blocks and clears this.
  bool plan_checkpoints_all_blocks = false;
  RuntimeSpec runtime;
  DistributedSpec distributed;
  MemorySpec memory;  // per rank
  PlannerSpec planner;
  std::optional<double> window_seconds;  // completion window, when the job has one
  InitSpec init_from;
};

// On the CPU the host is the device: memory a plan keeps "on the host" is the same RAM and
// counts against memory.budget, so the host levers free nothing there and the planner does
// not try them, unless memory.simulated_device says the CPU stands in for an accelerator.
inline bool HostIsTheDevice(const JobSpec& spec) {
  return spec.runtime.device == "cpu" && !spec.memory.simulated_device;
}

// Whether a plan of `spec` may keep the optimizer state on the host: planner.optimizer_states
// allows it and the host is not the device.
inline bool MayKeepStateOnTheHost(const JobSpec& spec) {
  const std::vector<StatePlacement>& allowed = spec.planner.optimizer_states;
  return !HostIsTheDevice(spec) &&
         std::find(allowed.begin(), allowed.end(), StatePlacement::kHost) != allowed.end();
}

// Why `spec`'s plan cannot keep its blocks' activations in host memory, as the error's
// expectation ("false ..."): on the CPU without memory.simulated_device the host is the
// device, and moving bytes there frees nothing. nullopt where it can.
std::optional<std::string> OffloadActivationsRefusal(const JobSpec& spec);

// Why `plan` cannot take the optimizer step inside the backward for a job of `model` over
// `distributed`, as the error's expectation ("false with ..."); nullopt where it can.
std::optional<std::string> StepInBackwardRefusal(const PlanSpec& plan, const ModelSpec& model,
                                                 const DistributedSpec& distributed);

const char* ToString(ModelInputs inputs);
const char* ToString(LossKind kind);
const char* ToString(Precision precision);
const char* ToString(StatePlacement placement);
const char* ToString(Launcher launcher);
const char* ToString(FinetuneMethod method);
// {microbatch, accumulation_steps, checkpoint_blocks, precision, optimizer_state, zero_stage}:
// the plan as every report (events, ledger, planner, parity) and the store show it
// (worker_protocol.h parses it).
nlohmann::json ToJson(const PlanSpec& plan);
// {method, rank, alpha, dropout, base_dtype, targets}: an adapter job as its identity and its
// release's model.json give it.
nlohmann::json ToJson(const FinetuneSpec& finetune);

// What one rank trains of `job`: its largest share as the effective batch, one rank. The
// planner, the ledger, the parity check and the profile plan and measure this job.
JobSpec RankJob(const JobSpec& job);

// Blocks a plan may checkpoint: the loaded model's, else as the kind's keys declare them (GPT
// decoder blocks, MLP hidden layers); 0 for a model whose blocks only loading counts
// (torchscript, plugin) before ResolveModel.
int NumBlocks(const ModelSpec& model);
// Whether the blocks are known: declared by the keys, or counted by ResolveModel.
bool BlocksKnown(const ModelSpec& model);
// True when a layer's output depends on the other samples of its microbatch (BatchNorm): the
// loaded model's answer, else the keys'.
bool HasBatchStatistics(const ModelSpec& model);

}  // namespace trainerd
