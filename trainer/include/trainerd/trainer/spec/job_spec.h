// The job spec: what is trained (model, data, optimizer, schedule, batch, updates) and the
// plan it is trained with. Parsed from YAML by ParseJobSpec (job_spec_parser.h); plain data,
// no torch, so the daemon can read it too.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace trainerd {

// Where the model comes from: built in (gpt, mlp), or the team's own: a TorchScript file or a
// LibTorch C++ plugin library (model_plugin.h).
enum class ModelKind { kGpt, kMlpClassifier, kTorchScript, kPlugin };

// How the built-in GPT computes attention and dropout on CPU tensors: kFused with the
// trainer's own kernels (blockwise_attention.h, dropout masks regenerated from counters in
// sample_dropout.h); kExplicit with LibTorch's ops, keeping what they keep
// (model.kernels: explicit).
enum class GptKernels { kFused, kExplicit };

struct GptOptions {
  int n_layer = 4;       // decoder blocks
  int n_head = 4;        // attention heads; must divide n_embd
  int n_embd = 128;      // model width
  int block_size = 128;  // context length in tokens
  int vocab_size = 256;  // token ids [0, vocab_size): 256 for bytes; tokens data may need more
  double dropout = 0.0;  // probability, [0, 1)
  bool bias = true;      // biases in Linear and LayerNorm layers
  GptKernels kernels = GptKernels::kFused;
};

struct MlpOptions {
  int hidden = 256;         // width of each hidden layer
  int layers = 2;           // hidden layers ("blocks")
  bool batch_norm = false;  // BatchNorm1d after each hidden Linear
  double dropout = 0.0;
};

// What a model reads: next-token windows of token ids (GPT-like, logits [B, T, V]), the
// byte histogram of a text window with its slice as the class (classifier, logits [B, C]), or
// the rows of data.format: tensors as they are (outputs shaped for model.loss).
enum class ModelInputs { kTokens, kByteHistogram, kRows };

// What the outputs are trained against (loss.h): cross-entropy of logits against class ids
// (targets equal to ignore_index carry no loss), squared error against targets of the
// outputs' shape, or the TorchScript module's own exported `loss(outputs, targets) -> (sum,
// count)`. Every loss is a sum divided by the term count of the whole effective batch.
enum class LossKind { kCrossEntropy, kMse, kModule };

struct LossSpec {
  LossKind kind = LossKind::kCrossEntropy;
  std::int64_t ignore_index = -100;  // cross_entropy; PyTorch's default
};

// What the team's own model (TorchScript or plugin) reads and costs, as the job gives it, and
// what only loading it tells: filled by ResolveOwnModel (own_model.h) in the worker before
// anything uses them; 0 / false / empty in the daemon.
struct OwnModelOptions {
  ModelInputs inputs = ModelInputs::kTokens;
  std::optional<double> flops_per_sample;  // forward + backward, given by the job
  // Without flops_per_sample: 3 x the matrix products of one forward (matmul_flops.h), or
  // none and why (MFU is then null).
  std::optional<double> counted_flops_per_sample;
  std::string flops_unknown_reason;
  int num_blocks = 0;
  bool has_batch_statistics = false;
  std::string sha256;            // of model.path or model.library
  std::int64_t output_size = 0;  // the outputs' last dimension: vocabulary or classes
};

// A module the team exported from Python with torch.jit.script or trace
// (docs/bring-your-own-model.md). With the block protocol (a ModuleList attribute `blocks`
// and exported methods `embed` and `head`) it runs as embed -> blocks -> head and a plan may
// checkpoint its blocks; without it, it runs as one opaque forward.
struct TorchScriptOptions {
  std::string path;  // the .pt file, absolute after parsing
  std::string blocks = "blocks";
  std::string embed = "embed";
  std::string head = "head";
  bool protocol_named = false;  // the job names blocks/embed/head: missing ones are an error
};

// A model written in LibTorch C++: a shared library built against the installed trainerd
// package (find_package(trainerd)) that registers its models by name (model_plugin.h).
struct PluginOptions {
  std::string library;  // the .so file, absolute after parsing
  std::string name;     // the registered model; "" = the library's only one
  nlohmann::json options = nlohmann::json::object();  // model.options, handed to its factory
};

struct ModelSpec {
  ModelKind kind = ModelKind::kGpt;
  GptOptions gpt;  // gpt.block_size is also the window of the MLP and a TorchScript model
  MlpOptions mlp;
  TorchScriptOptions torchscript;
  PluginOptions plugin;
  OwnModelOptions own;  // torchscript and plugin
  LossSpec loss;        // the built-in models train with cross_entropy
};

enum class DataFormat {
  kText,     // text files: byte tokens, the tail of each file held out
  kTokens,   // flat little-endian arrays of token ids (train.bin / val.bin), memory-mapped
  kTensors,  // inputs and targets arrays (.npy or .safetensors), a sample per row, mmapped
};

struct DataSpec {
  DataFormat format = DataFormat::kText;
  // text: one slice each, named by file name. Symlinks to the same file count once.
  std::vector<std::string> files;
  double holdout_fraction = 0.1;  // text: tail of each file held out for evaluation, (0, 0.5]
  // tokens, tensors: the training split and the evaluation splits (one slice each, named by
  // stem): token files, or (tensors) .safetensors files or directories of .npy files.
  std::string train;
  std::vector<std::string> eval;
  int token_bytes = 2;  // tokens: 2 (uint16) or 4 (uint32)
  // tensors: the arrays' names (tensor names in .safetensors, file stems of .npy).
  std::string inputs_name = "inputs";
  std::string targets_name = "targets";
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

// How a job is executed. A plan never changes the job: same effective batch, same mean-loss
// gradient, same number of optimizer updates, same learning-rate schedule.
struct PlanSpec {
  int microbatch = 0;          // samples per forward/backward; 0 = effective batch
  int accumulation_steps = 0;  // microbatches per update: ceil(effective_batch / microbatch)
  std::vector<int> checkpoint_blocks;  // sorted indices of blocks recomputed in backward
  Precision precision = Precision::kFp32;
  // checkpoint_blocks: all for a model whose blocks are counted when the worker loads it
  // (torchscript, plugin): ResolveOwnModel fills checkpoint_blocks and clears this.
  bool checkpoint_all_blocks = false;
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
};

struct RuntimeSpec {
  int threads = 0;             // intra-op threads; 0 = auto (the CPUs this process may use)
  std::string device = "cpu";  // "cpu" or "cuda" (where LibTorch has CUDA)
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

struct DistributedSpec {
  int ranks = 1;
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

struct JobSpec {
  std::string source_path;  // the YAML file it came from
  ModelSpec model;
  DataSpec data;
  OptimizerSpec optimizer;
  ScheduleSpec schedule;
  TrainingSpec training;
  PlanSpec plan;
  bool plan_given = false;  // the YAML has a `plan:` section (a plan forced by the author)
  RuntimeSpec runtime;
  DistributedSpec distributed;
  MemorySpec memory;  // per rank
  PlannerSpec planner;
  std::optional<double> window_seconds;  // completion window, when the job has one
  InitSpec init_from;
};

const char* ToString(ModelKind kind);
const char* ToString(ModelInputs inputs);
const char* ToString(LossKind kind);
const char* ToString(Precision precision);
const char* ToString(Launcher launcher);  // "local", "torchrun", "slurm"
// {microbatch, accumulation_steps, checkpoint_blocks, precision}: the plan as every report
// (events, ledger, planner, parity) shows it.
nlohmann::json ToJson(const PlanSpec& plan);

// What one rank trains of `job`: its largest share as the effective batch, one rank. The
// planner, the ledger, the parity check and the profile plan and measure this job.
JobSpec RankJob(const JobSpec& job);

// Blocks a plan may checkpoint: GPT decoder blocks, MLP hidden layers, the blocks of a
// TorchScript model with the block protocol or of a plugin (0 until resolved, and without
// the protocol).
int NumBlocks(const ModelSpec& model);
// True when a layer's output depends on the other samples of its microbatch (BatchNorm).
bool HasBatchStatistics(const ModelSpec& model);

}  // namespace trainerd
