// The worker protocol: what trainer-run tells whoever runs it, as typed values. Training
// prints events, one JSON object per line with an "event" field (start, warning, update, eval,
// checkpoint, finish, error, plan); a report mode (--ledger, --plan-only, --parity, --profile,
// --device-info) prints one report object. The worker, the daemon, the report page, trainerctl
// and the terminal printer all use these types; each type's fields are listed once (in
// worker_protocol.cc), and its serializer and its parser both walk that list, so a key is
// never spelled twice. The start event and every report carry protocol_version; the schema
// for people is docs/trainer-run.md. No torch: the daemon links it.
//
// Parsing is lenient, as the daemon needs it to be: a field of the wrong type (a string where
// a number belongs, a count that is negative or does not fit in an int, a hash that is not 64
// hex digits) keeps its default and is named in `mistyped`; unknown keys are ignored. Plain
// values, freely copyable; no shared state.
#pragma once

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "trainerd/common/status.h"
#include "trainerd/trainer/spec/data_profile.h"
#include "trainerd/trainer/spec/job_spec.h"

namespace trainerd {

// Raised whenever a type below changes its fields: a daemon refuses a worker of another
// version (trainer-run --version --json).
inline constexpr int kWorkerProtocolVersion = 17;

// A SHA-256 as 64 lowercase hex digits: it names release files, so nothing else is accepted.
struct Sha256Digest {
  std::string hex;
  bool operator==(const Sha256Digest&) const = default;
};

// A figure of the plan's run and of the reference's, written [plan, reference].
struct PlanAndReference {
  double plan = 0;
  double reference = 0;
};

// The training device: {"type": "cpu" | "cuda", "name", "total_memory_bytes"}, on CUDA also
// compute_capability ("9.0"), driver_version and runtime_version ("13.0").
struct DeviceInfo {
  std::string type;
  std::string name;
  std::int64_t total_memory_bytes = 0;
  std::optional<std::string> compute_capability;
  std::optional<std::string> driver_version;
  std::optional<std::string> runtime_version;
  // CPU: its instruction sets ("AVX2", "AVX-512 with bf16 and AMX"), the BLAS that multiplies
  // its matrices ("OpenBLAS 0.3.21", MKL's version) and the kernels it chose ("Zen",
  // "Prescott"; "unknown" for a BLAS that names none), and why they run below the CPU when
  // they do (device/blas_kernel.h); where the worker restarted itself with other kernels, what
  // it did and measured (device/blas_core_fix.h).
  std::optional<std::string> isa;
  std::optional<std::string> blas;
  std::optional<std::string> blas_core;
  std::optional<std::string> blas_below_cpu;
  std::optional<std::string> blas_core_fix;
};

// The software a measurement depends on.
struct SoftwareInfo {
  std::string torch_version;
  std::string blas;  // the BLAS library file mapped into the worker
  std::string compiler;
};

// What a model predicted on one held-out slice (trainer/evaluation/prediction_tally.h).
struct PredictionDistribution {
  // A cross_entropy model: per predicted position (targets not ignored), counts in
  // kPredictionBins equal bins of [0, 1].
  std::vector<std::int64_t> entropy;  // the entropy over log(classes): 0 certain, 1 uniform
  std::vector<std::int64_t> top1;     // the largest probability
  std::vector<std::int64_t> classes;  // the predicted class's counts, at most 256 classes
  // An mse model: its outputs' mean and standard deviation.
  std::optional<double> mean;
  std::optional<double> spread;
};
inline constexpr int kPredictionBins = 20;
inline constexpr std::int64_t kMaxCountedClasses = 256;

// The loss of each held-out window of one slice (trainer/evaluation/window_loss_tally.h): its
// sum and term count, in the order the windows were read. The evaluation's noise is taken
// from them by window (windows are the independent units; a window's positions are not):
// daemon/eval_noise.h.
struct WindowLosses {
  std::vector<double> sums;
  std::vector<std::int64_t> terms;
};

struct SliceLoss {
  std::string name;
  double loss = std::numeric_limits<double>::quiet_NaN();  // NaN when the worker gave none
  // The simple baseline's loss on the same held-out samples (evaluation/simple_baseline.h);
  // none for a module's own loss.
  std::optional<double> baseline_loss;
  std::optional<PredictionDistribution> predictions;  // none for a module's own loss
  std::optional<WindowLosses> windows;                // none for a module's own loss
};

// ---- events -------------------------------------------------------------------------------

struct StartEvent {
  struct Model {
    std::string kind;
    std::int64_t parameters = 0;
    int blocks = 0;
    int block_size = 0;
  };
  struct Distributed {
    int world_size = 1;
    std::optional<std::string> backend;  // gloo, nccl; none for one process
    int rank_batch = 0;                  // this rank's samples per update
  };
  struct Slice {
    std::string name;
    std::int64_t train_bytes = 0;
    std::int64_t holdout_bytes = 0;
  };
  struct Data {
    std::string fingerprint;
    std::vector<Slice> slices;
  };
  int protocol_version = 0;
  std::string config;
  std::string job_identity;
  Model model;
  PlanSpec plan;
  int effective_batch = 0;
  int updates = 0;
  std::uint64_t seed = 0;
  int resumed_from_update = 0;
  Distributed distributed;
  int threads = 0;
  std::string device;
  DeviceInfo device_info;
  std::string torch_version;
  SoftwareInfo software;
  std::int64_t budget_bytes = 0;
  std::int64_t usable_bytes = 0;
  Data data;
};

// kind: batch_norm_accumulation, checkpoint_ignored, checkpoint_corrupt,
// checkpoint_device_changed.
struct WarningEvent {
  std::string kind;
  std::string message;
};

struct UpdateEvent {
  int update = 0;  // 1-based
  int updates = 0;
  double loss = 0;  // mean over the effective batch
  double lr = 0;
  std::optional<double> grad_norm;  // before clipping; none when an fp16 overflow skipped the step
  bool skipped = false;
  double update_seconds = 0;
  double samples_per_second = 0;
  double tokens_per_second = 0;
  std::int64_t live_bytes = 0;  // device bytes allocated after the update
  double elapsed_seconds = 0;
  double eta_seconds = 0;
};

struct EvalEvent {
  int update = 0;
  // The weights of init_from evaluated before the first update (update 0).
  bool initial = false;
  std::optional<std::string> init_from;
  std::vector<SliceLoss> slices;
  double mean_loss = 0;
};

struct CheckpointEvent {
  int update = 0;
  std::string path;
  std::string reason;  // interval, final, signal
};

struct FinishEvent {
  // A file the model's own code needs beside the weights (a Hugging Face folder's
  // config.json, tokenizer files), written beside them: the release carries it.
  struct Companion {
    std::string path;
    Sha256Digest sha256;
  };
  struct ModelFiles {
    std::string weights;  // model.safetensors beside the model
    Sha256Digest weights_sha256;
    std::string description;  // model.json
    std::vector<Companion> companions;
  };
  int updates = 0;
  int updates_trained = 0;  // by this process: 0 when it resumed at the job's last checkpoint
  std::optional<double> final_train_loss;
  std::vector<SliceLoss> eval_slices;
  double eval_mean_loss = 0;
  std::string model_path;
  Sha256Digest model_sha256;
  ModelFiles model_files;
  double elapsed_seconds = 0;
  std::optional<double> samples_per_second;  // the whole job's; none when nothing trained
  int world_size = 1;
  std::optional<double> samples_per_second_per_rank;
  std::optional<double> tokens_per_second;
  std::string throughput_method;
  std::int64_t peak_bytes = 0;           // allocated
  std::int64_t reserved_peak_bytes = 0;  // what the allocator held
  std::string memory_method;
  std::optional<double> model_flops_per_sample;
  std::string flops_method;
  std::optional<double> model_flops_per_second;
  double peak_flops_per_second = 0;
  // CPU, fp32: the instruction set's roof beside the measured peak, and how it was counted
  // (common/isa_peak.h); absent where the clock or the instruction set is unknown.
  std::optional<double> isa_peak_flops_per_second;
  std::optional<std::string> isa_peak_method;
  std::optional<double> mfu;
  bool measurement_valid = false;
  std::string measurement_note;
  std::string hardware;
};

// Bytes by category when a run failed: what is exact, and what was live.
struct MemorySnapshot {
  std::int64_t parameters_bytes = 0;
  std::int64_t gradients_bytes = 0;
  std::int64_t optimizer_state_bytes = 0;  // on the device
  std::int64_t host_state_bytes = 0;       // master weights, gradients, state kept on the host
  std::int64_t live_bytes = 0;
  std::int64_t peak_bytes = 0;
  std::int64_t reserved_bytes = 0;
  std::int64_t limit_bytes = 0;
  std::int64_t budget_bytes = 0;
  std::int64_t usable_bytes = 0;
};

// What an oom or leak error adds: where, the plan (oom), the growth (leak) and the memory.
struct FailureDetails {
  int update = 0;
  std::optional<PlanSpec> plan;
  std::optional<std::int64_t> growth_bytes;
  MemorySnapshot ledger;
};

// kind: config, model, data, checkpoint, nan, oom, leak, io, distributed, internal.
// phase: what the worker was doing: load, ledger, plan, parity, profile or train; a
// training's out-of-memory names its part: resume, initial_eval, update, eval, checkpoint or
// finish.
struct ErrorEvent {
  std::string kind;
  std::string message;
  std::optional<FailureDetails> details;
  std::optional<std::string> phase;
};

// ---- reports ------------------------------------------------------------------------------

struct BlockActivation {
  int index = 0;
  std::int64_t activation_bytes = 0;
  std::int64_t checkpointed_activation_bytes = 0;
  double forward_seconds = 0;
};

// trainer-run --ledger: bytes by category for one job at its plan and target shape, measured.
//   parameters, gradients, optimizer_state  exact, summed from the tensors
//   inputs          the update's microbatch input and target tensors
//   activations     live bytes after one microbatch's forward and loss minus before it
//   temporaries     the measured peak minus everything above (the buffers the peak sits on)
//   blocks          per block: bytes one forward through it leaves alive, uncheckpointed and
//                   checkpointed, and its forward time (what recomputing it costs)
// The categories sum to the measured peak. A plan that keeps the optimizer state on the host
// (PlanSpec::optimizer_state) has none on the device: `host` lists what it holds there. A plan
// that shards the model's state over N ranks (PlanSpec::zero_stage) is measured on one process
// holding all of it; the ledger then shows the largest rank's shard of each sharded category
// (`sharded_over_ranks` N), and the peaks less the optimizer state the other ranks keep
// (`optimizer_state_on_other_ranks`). Stage 2's other shards' gradients still exist through a
// backward until they are summed: they stay in the peak, as temporaries.
// What a plan keeps in host memory, outside the device budget: with the optimizer state on
// the host (StatePlacement::kHost) the fp32 master weights, the gradients' host copy and
// AdamW's state, exact from the tensors; with the activations offloaded
// (PlanSpec::offload_activations) what the first microbatch's forward left there; the host's
// peak over an update; and the budget it is held to.
struct HostLedger {
  std::int64_t master_weights_bytes = 0;
  std::int64_t gradients_bytes = 0;
  std::int64_t optimizer_state_bytes = 0;
  std::int64_t activations_bytes = 0;
  std::int64_t peak_bytes = 0;
  std::int64_t budget_bytes = 0;  // memory.host_budget, or the host's available memory
  // On the CPU without memory.simulated_device the host is the device: these bytes are also
  // in the device's peak and against its budget (HostIsTheDevice).
  bool in_device_count = false;
};

struct MemoryLedger {
  int protocol_version = kWorkerProtocolVersion;
  std::int64_t parameters_bytes = 0;
  // Of those, the frozen ones' (finetune: lora freezes the model's own): no gradient and no
  // optimizer state.
  std::int64_t frozen_parameters_bytes = 0;
  std::int64_t gradients_bytes = 0;
  std::int64_t optimizer_state_bytes = 0;
  std::int64_t activations_bytes = 0;  // the blocks' and the embeddings', for the backward
  // What a next-token model's output layer and its loss keep for the backward (the logits,
  // their fp32 copy and log-probabilities; at the plan's output_chunk, only the loss: the
  // chunks are recomputed in the backward), in the first microbatch's forward. 0 for a model
  // without one.
  std::int64_t output_layer_bytes = 0;
  std::int64_t temporaries_bytes = 0;
  std::int64_t inputs_bytes = 0;
  // An evaluation's peak (in microbatches of the plan's size, beside the model's state).
  std::int64_t evaluation_peak_bytes = 0;
  std::int64_t peak_bytes = 0;           // the higher of the update's and the evaluation's
  std::int64_t reserved_peak_bytes = 0;  // the allocator's peak holding (CUDA cache); = peak on CPU
  std::int64_t budget_bytes = 0;
  std::int64_t usable_bytes = 0;
  std::optional<HostLedger> host;  // set when the plan keeps state or activations on the host
  int sharded_over_ranks = 1;      // the ranks a plan with zero_stage > 0 shards the state over
  std::int64_t optimizer_state_on_other_ranks = 0;  // and what of it this rank does not keep
  std::vector<BlockActivation> blocks;
  std::string blocks_note;  // why there are no blocks a plan can checkpoint; "" when there are
  PlanSpec plan;
  std::string method;
  DeviceInfo device_info;
};

struct RejectedPlan {
  PlanSpec plan;
  std::int64_t predicted_peak_bytes = 0;
  double predicted_duration_seconds = 0;  // by the time model
  std::string reason;
  bool validated = false;  // rejected after a real update, not on prediction alone (not sent)
  // The median of its timed updates, where it was timed and fitted.
  std::optional<double> measured_update_seconds = std::nullopt;
};

// A finalist of the planner's rounds.
struct TimedPlan {
  PlanSpec plan;
  std::vector<double> update_seconds;  // one optimizer update per round it was timed in
  double MedianSeconds() const;        // REQUIRES: update_seconds not empty
};

// trainer-run --plan-only, and the first line of --plan auto: the planner's choice.
struct ChosenPlan {
  int protocol_version = kWorkerProtocolVersion;
  PlanSpec plan;
  std::int64_t predicted_peak_bytes = 0;
  std::int64_t measured_peak_bytes = 0;
  std::int64_t usable_bytes = 0;
  // How the host's memory counted (HostIsTheDevice): on the CPU the host is the device, so
  // the planner did not try the host levers; memory.simulated_device made the CPU stand in
  // for an accelerator, the host levers moving bytes out of its budget. Both false on a GPU.
  bool host_is_the_device = false;
  bool simulated_device = false;
  double predicted_update_seconds = 0;    // by the probes' time model
  double measured_update_seconds = 0;     // median of the chosen plan's timed updates
  double predicted_duration_seconds = 0;  // measured update x the job's updates
  // The time model's update x the job's updates: the figure a rejected plan's
  // predicted_duration_seconds compares with.
  double modelled_duration_seconds = 0;
  std::optional<double> window_seconds;
  bool fits_memory = false;
  bool fits_window = true;             // true when the job has no window
  double probe_seconds = 0;            // time spent probing and validating
  std::vector<RejectedPlan> rejected;  // faster alternatives and why they were not chosen
  struct Selection {
    std::vector<TimedPlan> timed;  // the finalists' timings, round by round
    double noise = 0;              // median relative spread of a finalist's timings
    double tie_band = 0;           // finalists this close to the fastest median were tied
  };
  Selection selection;
  DeviceInfo device_info;
  // predicted / measured update - 1 for the chosen plan (0 when either is unknown): how far
  // the time model that ordered the candidates was off this night.
  double TimeModelError() const;
};

// Relative differences allowed, each at every update of the run.
struct ParityTolerances {
  double loss = 0;
  double learning_rate = 0;
  double grad_norm = 0;
  double gradient = 0;     // each parameter's gradient
  double step = 0;         // the optimizer step, all parameters together
  double tensor_step = 0;  // the optimizer step, each parameter
};

// The largest differences of one update of the run.
struct ParityUpdate {
  PlanAndReference loss;
  PlanAndReference lr;
  PlanAndReference grad_norm;
  // The plan's fp16 loss scaler skipped this update (an overflow): the other sides computed it
  // without stepping, its gradient is not compared, and no side may have moved a parameter.
  bool skipped = false;
  double gradient_diff = 0;  // worst parameter's relative gradient difference
  std::string gradient_parameter;
  double step_diff = 0;               // the optimizer step, all parameters together
  double worst_tensor_step_diff = 0;  // the parameter whose step differs most
  std::string worst_tensor_step_parameter;
};

// One comparison of the check: the plan, run in `precision`, against the fp32 reference.
struct ParityComparison {
  // "structure": the plan's microbatches, accumulation and checkpointing run in fp32 and held
  // to fp32's tolerances, so rounding hides no bug of the split; "as planned": the plan in its
  // own precision, held to that precision's tolerances.
  std::string judges;
  Precision precision = Precision::kFp32;
  ParityTolerances tolerances;
  std::vector<ParityUpdate> updates;
  // The largest measured difference over its tolerance, any check of any update (below 1
  // passes; a failing fault shows how far beyond), and what it was: "update 2: the gradient
  // of block0.ln1.weight". A failure that is no difference (missing, not finite, stepped on
  // one side only) is in the report's failures alone.
  double worst_ratio = 0;
  std::string worst_check;
};

// What the parity check holds at once on the job's device, and the limit it runs under. Its
// sides' updates run one at a time, each side holding the model's state beside them; the
// prediction is made from the reference's ledger before any side is built (parity.h).
struct ParityMemory {
  std::int64_t usable_bytes = 0;       // the job's
  int trainers = 0;                    // the reference and the plan's one or two sides
  std::int64_t model_state_bytes = 0;  // one trainer's parameters, gradients and optimizer state
  // The judge's fp32 copies at most (the parameters an update starts from, and the gradients
  // and parameters after it of the reference and of the side judged). Host memory: beside a
  // GPU they are off the device; on a CPU they share its memory, counted in the prediction
  // and added to the limit (the budget bounds the trainers, not the judge's copies).
  std::int64_t snapshot_bytes = 0;
  std::int64_t limit_bytes = 0;  // usable bytes, plus the snapshots on a CPU
  // A plan that keeps its optimizer state on the host leaves no room for a second model's
  // state: on a CPU that simulates an accelerator (memory.simulated_device) the reference
  // then runs in host memory, outside the limit, and `trainers`
  // and `model_state_bytes` count the plan's sides and their device state only.
  bool reference_on_host = false;
  std::int64_t predicted_peak_bytes = 0;
  std::int64_t measured_peak_bytes = 0;  // the device's peak over the check as run
};

// trainer-run --parity: the release check of a plan (plan/parity.h).
struct ParityReport {
  int protocol_version = kWorkerProtocolVersion;
  bool pass = false;
  // One sentence per check that failed, in order: "bf16 as planned, update 2: ...".
  std::vector<std::string> failures;
  PlanSpec plan;          // the job's
  PlanSpec checked_plan;  // the plan as run: the job's, or its reduction (see `reduction`)
  int checked_effective_batch = 0;
  // Empty when the real shape ran; else what was reduced, from the job's value to the
  // checked one: {"effective_batch": [64, 16], "microbatch": [16, 8], ..., "why": ...}.
  nlohmann::json reduction = nlohmann::json::object();
  // Dropout modules the trainer does not own (a TorchScript model's), switched off on both
  // sides: their masks come from the default generator and would differ with the split.
  int own_dropout_switched_off = 0;
  // The structure in fp32 first when the plan computes in another precision, then the plan as
  // planned; one comparison when the plan computes in fp32.
  std::vector<ParityComparison> comparisons;
  ParityMemory memory;
  DeviceInfo device_info;
};

// trainer-run --profile: where an update of the plan spends its time (profile/update_profile.h).
struct ProfileReport {
  struct Group {
    std::string group;
    double self_seconds = 0;  // per update
    double share = 0;         // of the profiled update
    double calls = 0;         // per update
    double flops = 0;
    double bytes = 0;
    double intensity = 0;
    double achieved_flops = 0;
    double achieved_bytes_per_second = 0;
    double attainable_flops = 0;
    double fraction_of_bound = 0;
    std::string bound;  // compute, memory
  };
  struct Op {
    std::string name;
    std::string group;
    double calls = 0;
    double self_seconds = 0;
    double share = 0;
  };
  int protocol_version = kWorkerProtocolVersion;
  int updates = 0;
  int warmup_updates = 0;
  double update_seconds = 0;
  double unprofiled_update_seconds = 0;
  double outside_ops_seconds = 0;
  std::string precision;
  double peak_flops = 0;
  std::optional<double> isa_peak_flops;  // as FinishEvent's, for an fp32 profile
  std::optional<std::string> isa_peak_method;
  double memory_bandwidth_bytes_per_second = 0;
  double ridge_intensity = 0;
  std::vector<Group> groups;
  std::vector<Op> top_ops;  // the ops with the most self time
  std::optional<std::string> trace_path;
  std::string method;
  DeviceInfo device_info;
};

// trainer-run --device-info.
struct DeviceInfoReport {
  int protocol_version = kWorkerProtocolVersion;
  DeviceInfo device_info;
};

// trainer-run --data-profile: the job's data as its model reads it.
struct DataProfileReport {
  int protocol_version = kWorkerProtocolVersion;
  std::string data_fingerprint;
  DataProfile profile;
  // The classes the model predicts (its vocabulary), 0 when only a run would tell; ids at or
  // beyond it, which it cannot learn.
  std::int64_t vocabulary = 0;
  std::int64_t ids_beyond_vocabulary = 0;
  DeviceInfo device_info;
};

// trainer-run --version --json: what the daemon checks before a cycle runs anything (the
// protocol) and keys validated plans by (the trainer's and LibTorch's versions).
struct VersionReport {
  int protocol_version = kWorkerProtocolVersion;
  std::string trainer_version;  // e.g. "0.1.0+g1a2b3c4"
  SoftwareInfo software;
};

// ---- the wire -----------------------------------------------------------------------------

// --plan auto: the planner's report, before training starts.
struct PlanEvent {
  ChosenPlan plan;
};

using WorkerEvent = std::variant<StartEvent, WarningEvent, UpdateEvent, EvalEvent, CheckpointEvent,
                                 FinishEvent, ErrorEvent, PlanEvent>;

// The serializer: the JSON object of a value of any type above (the reports, the events'
// parts, DeviceInfo, PlanSpec: {microbatch, accumulation_steps, checkpoint_blocks,
// precision}). An event's object has its "event".
template <typename T>
nlohmann::json ToJson(const T& value);
nlohmann::json ToJson(const WorkerEvent& event);

// The parser of the same types. `mistyped` (may be null) receives the dotted names of the
// fields that had another type, sorted; a value that is not an object gives a default T and
// the name "(not an object)".
template <typename T>
T Parse(const nlohmann::json& json, std::vector<std::string>* mistyped = nullptr);

struct ParsedEvent {
  WorkerEvent event;
  std::string kind;                   // its "event"
  std::vector<std::string> mistyped;  // sorted dotted names
};
// One line of a worker's output: InvalidArgument when it is not a JSON object whose "event"
// names one of the events above.
Result<ParsedEvent> ParseWorkerEvent(std::string_view line);

}  // namespace trainerd
