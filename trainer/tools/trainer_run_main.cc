// trainer-run: trains one job in the foreground. See `trainer-run --help`.
#include <torch/cuda.h>
#include <torch/version.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

#include "trainerd/common/cache_dir.h"
#include "trainerd/common/cpu_isa.h"
#include "trainerd/trainer/data/dataset.h"
#include "trainerd/trainer/device/blas_core_fix.h"
#include "trainerd/trainer/device/device_memory.h"
#include "trainerd/trainer/device/machine.h"
#include "trainerd/trainer/distributed/data_parallel.h"
#include "trainerd/trainer/loop/event_sink.h"
#include "trainerd/trainer/loop/initial_weights.h"
#include "trainerd/trainer/loop/trainer.h"
#include "trainerd/trainer/models/build_model.h"
#include "trainerd/trainer/models/paper_ledger.h"
#include "trainerd/trainer/models/resolve_model.h"
#include "trainerd/trainer/plan/memory_ledger.h"
#include "trainerd/trainer/plan/parity.h"
#include "trainerd/trainer/plan/planner.h"
#include "trainerd/trainer/plan/what_if.h"
#include "trainerd/trainer/profile/update_profile.h"
#include "trainerd/trainer/semantics/training_fault.h"
#include "trainerd/trainer/spec/exit_codes.h"
#include "trainerd/trainer/spec/job_spec_parser.h"
#include "trainerd/trainer/spec/model_kind.h"
#include "trainerd/trainer/spec/plan_text.h"
#include "trainerd/trainer/spec/profile_text.h"
#include "trainerd/trainer/spec/rank_environment.h"
#include "trainerd/trainer/spec/units.h"
#include "trainerd_version.h"

namespace {

namespace exit_code = trainerd::exit_code;

constexpr const char* kUsage = R"(usage:
  trainer-run --config FILE [--plan FILE|auto] [--output-dir DIR]
              [--resume | --resume-if-compatible] [--json]
  trainer-run --config FILE [--plan FILE] --ledger [--json]
  trainer-run --config FILE --plan-only [--for-parity] [--json]
  trainer-run --config FILE --device-info
  trainer-run --config FILE --data-profile [--json]
  trainer-run --config FILE [--plan FILE] --parity [--parity-updates N] [--json]
  trainer-run --config FILE [--plan FILE] --profile [--profile-updates N]
              [--profile-trace FILE] [--json]
  trainer-run --check-blas
  trainer-run ... --test-only-fault NAME
  trainer-run --what-if --static SIZE --act-per-sample SIZE --device SIZE [--reserve 10%]
              [--microbatch N --blocks N] [--json]
  trainer-run --what-if --model DIR --device SIZE [--reserve 10%] [--block N]
              [--microbatch N] [--accumulation N] [--precision P] [--checkpoint none|all]
              [--optimizer-state device|host] [--output-chunk N|auto]
              [--step-in-backward] [--offload-activations] [--ranks N [--zero-stage 0|1|2]]
              [--lora-rank R [--lora-targets q_proj,v_proj] [--lora-base fp32|bf16]]
              [--json]

Trains the job described by a YAML job spec in the foreground, under its memory budget
(memory.budget less memory.reserve): an allocation beyond it is an out-of-memory error.

options:
  --config FILE        job spec (model, finetune, data, optimizer, schedule, training, plan,
                       runtime, memory, planner, window, init_from)
  --plan FILE          replace the spec's plan with this YAML/JSON mapping: microbatch,
                       accumulation_steps, checkpoint_blocks (all, none or [0, 2]),
                       precision (fp32, bf16, fp16), optimizer_state (device, host),
                       zero_stage, output_chunk, step_in_backward, offload_activations
  --plan auto          run the planner first, then train with the plan it chose
  --output-dir DIR     where the training checkpoint (checkpoint.pt) and the model artifact
                       (model.pt) are written; default: runs/<config name>
  --resume             continue from DIR/checkpoint.pt (same job; the plan may differ)
  --resume-if-compatible
                       continue from DIR/checkpoint.pt when it exists and belongs to this
                       job; otherwise start from update 0 with a warning event (a
                       damaged checkpoint is kept as DIR/checkpoint.pt.corrupt)
  --init-from FILE|none
                       start from these weights instead of the spec's init_from: a release
                       folder or its model.safetensors (every tensor of the model by name
                       and shape); none: from the random initialisation. The first eval
                       (update 0, "initial") is of these weights
  --base-dir DIR       resolve the config's relative data paths against DIR instead of the
                       config's folder (for a copy of a config kept elsewhere)
  --budget SIZE        replace memory.budget (e.g. 512MiB) for this invocation: training,
                       --ledger and --plan-only all use it
  --ledger             measure the memory ledger at the plan and target shape: bytes of
                       parameters, gradients, optimizer state, activations, temporaries,
                       inputs, per block, the peak against usable memory
  --plan-only          run the planner and print the chosen plan and rejected alternatives
  --for-parity         with --plan-only: the plan is to pass --parity before it trains (as
                       the daemon's are); reject plans whose parity check cannot fit the
                       usable memory even at its smallest shape
  --device-info        print the job's training device as JSON: {"device_info": {type, name,
                       total_memory_bytes; on CUDA compute_capability, driver_version,
                       runtime_version}}; the JSON of --ledger, --plan-only and --parity
                       carries the same device_info
  --data-profile       what the training data looks like, as the daemon's input-quality
                       check compares it night to night: its size, each id's count (tokens,
                       text, integer targets), rows holding NaN or Inf and the input
                       columns' mean and spread (tensors), the ids at or beyond the model's
                       vocabulary; learned in the pass that hashes the files, cached with
                       their digests
  --parity             release check of the plan: N updates of the plan against the
                       reference (no checkpointing, real large batch, fp32), same data and
                       seed; compares every update's loss, learning rate, gradient norm and
                       gradients before clipping, and parameters after the step; prints
                       the worst differences, what failed, and a verdict (exit 7 on FAIL);
                       the whole check is fitted to the usable memory, at a reduced batch
                       when it must (exit 4 when even the smallest does not fit)
  --parity-updates N   updates in the parity run (default 5)
  --profile            where an update of the plan spends its time (CPU jobs): N updates
                       after a warm-up, each LibTorch op's self time grouped as matrix
                       products, attention, dropout, normalisation, optimizer and other, with
                       counted FLOPs and bytes on this machine's roofline (measured matmul
                       peak and memory bandwidth), and the top ops
  --profile-updates N  updates profiled (default 3)
  --profile-trace FILE also write the profiled updates as a Chrome trace (Perfetto opens it)
  --check-blas         multiply a 256 x 256 fp32 product with this process's BLAS against a
                       float64 reference computed without it, time a 1024^3 one on one
                       thread, and print {blas, blas_core, max_error, tolerance, ok,
                       gflops_one_thread} (exit 0 when within tolerance, 1 otherwise). A
                       worker whose OpenBLAS chose kernels below the CPU (Prescott on an
                       AVX-512 Xeon) runs it under OPENBLAS_CORETYPE set to the CPU's core
                       and restarts itself with that setting when it passes; the start
                       event's device_info.blas_core_fix says what was done and measured.
                       runtime.fix_blas_core: false turns this off
  --test-only-fault NAME
                       TEST ONLY: make the trainer commit a known bug (the plan side of
                       --parity, or training): loss_per_microbatch, step_per_microbatch,
                       clip_per_microbatch, lr_per_microbatch, recompute_fresh_rng,
                       inf_gradient, weight_decay_per_microbatch, frozen_parameter,
                       stale_host_weights, chunk_drops_a_token, step_before_clip,
                       offload_restored_stale
                       (docs/trainer-run.md, "Parity check")
  --what-if            budget arithmetic without a model (sizes: 3.2GB, 512MiB, ...)
  --what-if --model DIR
                       the memory ledger of a Hugging Face folder at real size, on paper:
                       from DIR/config.json alone (no weights read), by per-architecture
                       formulas fitted to measured ledgers of small models of each family;
                       then the largest microbatch that fits at fp32 and bf16, with no layer
                       checkpointed, with the layers' activations on the host and with every
                       layer checkpointed, with the optimizer state on the
                       device, on the host and stepped inside the backward. --block
                       (default the smaller of max_position_embeddings and 2048),
                       --microbatch (1), --accumulation (1), --precision (fp32),
                       --checkpoint (none), --optimizer-state (device), --output-chunk (auto: the planner's chunk where it fits
                       more; 0: the whole logits; also for the fits) set the ledger's
                       shape, --step-in-backward its optimizer step inside the
                       backward (no gradients kept; the fits have it as a placement,
                       one microbatch per update); --offload-activations keeps what the
                       layers not checkpointed save for the backward in host memory (the
                       fits have it as a third checkpoint column, "none, on the host", and
                       each fit names the host memory its largest microbatch needs);
                       --ranks N (1) adds the optimizer state
                       sharded over N data-parallel ranks (ZeRO stage 1) to the fits,
                       and --zero-stage (0) shards the ledger's; --lora-rank R trains
                       adapters of rank R on --lora-targets (the family's q_proj,v_proj or
                       c_attn) with the base frozen, its linear weights stored in
                       --lora-base (fp32). Where full training fits nowhere, the fits of
                       rank-16 adapters on a bf16 base follow
  --json               JSON on stdout even on a terminal (default when stdout is not one)
  --version            print the version, the LibTorch it runs on and its worker protocol
                       (with --json: protocol_version, trainer_version and software, which
                       the daemon checks and keys validated plans by)
  --help               this text

data-parallel: a job with distributed.ranks N > 1 trains as N processes started by a launcher,
  which tells each its rank through the environment: trainer-launch --ranks N -- trainer-run
  ..., torchrun --nproc_per_node=N --no_python trainer-run ..., or srun --ntasks=N trainer-run
  ... (RANK/WORLD_SIZE/LOCAL_RANK/MASTER_ADDR/MASTER_PORT or SLURM_PROCID/SLURM_NTASKS/
  SLURM_LOCALID/SLURM_JOB_NODELIST; docs/distributed.md). Rank 0 prints the events and writes
  the checkpoint and the model; the other ranks print only their errors, on stderr. The
  reports (--ledger, --plan-only, --parity, --profile) plan and measure one rank's share in
  one process, without a launcher.

output: training prints a progress bar on a terminal; otherwise one JSON object per line with
  "event" one of start, warning, update, eval, checkpoint, finish, error
  (schema: docs/trainer-run.md).

signals: SIGTERM or SIGINT finish the current update, write a checkpoint and exit 75.

exit codes:
  0   finished (or the requested report was printed)
  1   internal error (LibTorch, IO)
  2   usage error or invalid config
  3   invalid data (missing, empty, unreadable, too short for block_size)
  4   out of memory: the budget was exceeded, or no plan fits it
  5   --resume: checkpoint missing, corrupt, or written by a different job
  6   training diverged: a non-finite loss, or in fp32/bf16 a non-finite gradient
      (no step taken, nothing written)
  7   --parity: the plan does not match the reference within tolerance
  8   memory leak: live memory kept growing across updates
  75  interrupted by a signal after writing a checkpoint
)";

std::atomic<bool> g_stop_requested{false};

extern "C" void RequestStop(int /*signal*/) { g_stop_requested.store(true); }

struct Args {
  std::string config;
  std::string plan;
  std::string output_dir;
  std::string base_dir;
  std::string budget;
  std::string init_from;  // --init-from FILE|none
  trainerd::Resume resume = trainerd::Resume::kNo;
  bool json = false;
  bool ledger = false;
  bool plan_only = false;
  bool for_parity = false;  // --plan-only rejects plans whose parity check cannot fit
  bool device_info = false;
  bool data_profile = false;
  bool parity = false;
  int parity_updates = 5;
  bool profile = false;
  int profile_updates = 3;
  std::string profile_trace;
  trainerd::TrainingFault fault = trainerd::TrainingFault::kNone;
  bool what_if = false;
  std::map<std::string, std::string> what_if_values;  // --static, --act-per-sample, ...
  std::vector<std::string> argv;  // the whole command line, to restart with (FixBlasCore)
};

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

int ParseCount(const std::string& flag, const std::string& text, int min, int max) {
  char* end = nullptr;
  const long n = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || n < min || n > max) {
    throw UsageError(flag + ": expected an integer in [" + std::to_string(min) + ", " +
                     std::to_string(max) + "], got '" + text + "'");
  }
  return static_cast<int>(n);
}

Args ParseArgs(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw UsageError(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--config") {
      args.config = value();
    } else if (arg == "--plan") {
      args.plan = value();
    } else if (arg == "--output-dir") {
      args.output_dir = value();
    } else if (arg == "--resume") {
      args.resume = trainerd::Resume::kRequired;
    } else if (arg == "--resume-if-compatible") {
      args.resume = trainerd::Resume::kIfCompatible;
    } else if (arg == "--init-from") {
      args.init_from = value();
    } else if (arg == "--base-dir") {
      args.base_dir = value();
    } else if (arg == "--budget") {
      args.budget = value();
    } else if (arg == "--json") {
      args.json = true;
    } else if (arg == "--ledger") {
      args.ledger = true;
    } else if (arg == "--device-info") {
      args.device_info = true;
    } else if (arg == "--data-profile") {
      args.data_profile = true;
    } else if (arg == "--plan-only") {
      args.plan_only = true;
    } else if (arg == "--for-parity") {
      args.for_parity = true;
    } else if (arg == "--parity") {
      args.parity = true;
    } else if (arg == "--parity-updates") {
      args.parity_updates = ParseCount(arg, value(), 1, 1000);
    } else if (arg == "--profile") {
      args.profile = true;
    } else if (arg == "--profile-updates") {
      args.profile_updates = ParseCount(arg, value(), 1, 100);
    } else if (arg == "--profile-trace") {
      args.profile_trace = value();
    } else if (arg == "--test-only-fault") {
      const std::string name = value();
      const std::optional<trainerd::TrainingFault> fault = trainerd::ParseTrainingFault(name);
      if (!fault) throw UsageError("--test-only-fault: unknown fault '" + name + "'");
      args.fault = *fault;
    } else if (arg == "--what-if") {
      args.what_if = true;
    } else if (arg == "--static" || arg == "--act-per-sample" || arg == "--device" ||
               arg == "--reserve" || arg == "--microbatch" || arg == "--blocks" ||
               arg == "--model" || arg == "--block" || arg == "--accumulation" ||
               arg == "--precision" || arg == "--checkpoint" || arg == "--optimizer-state" ||
               arg == "--ranks" || arg == "--zero-stage" || arg == "--lora-rank" ||
               arg == "--lora-targets" || arg == "--lora-base" || arg == "--output-chunk") {
      args.what_if_values[arg] = value();
    } else if (arg == "--step-in-backward" || arg == "--offload-activations") {
      args.what_if_values[arg] = "";
    } else {
      throw UsageError("unknown argument '" + arg + "'");
    }
  }
  if (!args.what_if && !args.what_if_values.empty()) {
    throw UsageError(args.what_if_values.begin()->first + " only goes with --what-if");
  }
  if (!args.what_if && args.config.empty()) throw UsageError("--config FILE is required");
  if (args.for_parity && !args.plan_only)
    throw UsageError("--for-parity only goes with --plan-only");
  return args;
}

std::int64_t SizeFlag(const Args& args, const std::string& flag, bool required) {
  const auto it = args.what_if_values.find(flag);
  if (it == args.what_if_values.end()) {
    if (required) throw UsageError("--what-if needs " + flag + " SIZE");
    return 0;
  }
  trainerd::Result<std::int64_t> bytes = trainerd::ParseBytes(it->second);
  if (!bytes.ok()) throw UsageError(flag + ": " + bytes.status().message());
  return *bytes;
}

double ReserveFlag(const Args& args) {
  const auto it = args.what_if_values.find("--reserve");
  if (it == args.what_if_values.end()) return 0.0;
  const trainerd::Result<double> reserve = trainerd::ParseFraction(it->second);
  if (!reserve.ok()) throw UsageError("--reserve: " + reserve.status().message());
  if (*reserve < 0 || *reserve >= 1) throw UsageError("--reserve must be in [0, 1), e.g. 10%");
  return *reserve;
}

int CountFlag(const Args& args, const std::string& flag, int fallback, int max) {
  const auto it = args.what_if_values.find(flag);
  return it == args.what_if_values.end() ? fallback : ParseCount(flag, it->second, 1, max);
}

// The rank --what-if --model suggests adapters of when full training fits nowhere.
constexpr int kRecommendedRank = 16;

// The output chunk for `shape`: OutputChunkFor its ledger with the whole logits (the planner's
// rule, the same at every microbatch), unless the whole logits fit a larger microbatch or, as
// large, a lower peak at shape's (the chunks' summed head gradient can outweigh the logits
// they save at a microbatch of one or two).
int PlannedOutputChunk(const trainerd::PaperModel& model, trainerd::PaperShape shape,
                       std::int64_t usable) {
  shape.output_chunk = 0;
  const int chunk = trainerd::OutputChunkFor(model.Ledger(shape, 0, 0), shape.block_size);
  const auto score = [&](int output_chunk) {
    shape.output_chunk = output_chunk;
    return std::make_pair(model.LargestMicrobatch(shape, usable),
                          -model.Ledger(shape, usable, usable).peak_bytes);
  };
  return score(chunk) > score(0) ? chunk : 0;
}

// The largest microbatch and the peak at microbatch 1 of `shape` at fp32 and bf16, with no
// layer checkpointed, with the layers' activations on the host and with every layer
// checkpointed, for each place of the optimizer state: on the device,
// on the host, on the device stepped inside the backward (one microbatch per update), and
// (over shape.ranks > 1) sharded at ZeRO stage 1; each with the output chunk the planner picks
// for it where `planned_chunk`, else with shape's.
nlohmann::json PaperFits(const trainerd::PaperModel& model, const trainerd::PaperShape& shape,
                         bool planned_chunk, std::int64_t device, std::int64_t usable) {
  struct State {
    trainerd::StatePlacement placement;
    int zero_stage;
    bool in_backward;
  };
  std::vector<State> states = {{trainerd::StatePlacement::kDevice, 0, false},
                               {trainerd::StatePlacement::kHost, 0, false},
                               {trainerd::StatePlacement::kDevice, 0, true}};
  if (shape.ranks > 1) states.push_back({trainerd::StatePlacement::kDevice, 1, false});
  nlohmann::json fits = nlohmann::json::array();
  for (const auto& [placement, zero_stage, in_backward] : states) {
    for (const trainerd::Precision precision :
         {trainerd::Precision::kFp32, trainerd::Precision::kBf16}) {
      for (const char* checkpoint : {"none", "host", "all"}) {
        trainerd::PaperShape option = shape;
        option.precision = precision;
        option.checkpoint_all = checkpoint == std::string_view("all");
        option.offload_activations = checkpoint == std::string_view("host");
        option.optimizer_state = placement;
        option.zero_stage = zero_stage;
        option.step_in_backward = in_backward;
        if (in_backward) option.accumulation_steps = 1;
        option.microbatch = 1;
        if (planned_chunk) option.output_chunk = PlannedOutputChunk(model, option, usable);
        const int largest = model.LargestMicrobatch(option, usable);
        // What the host must hold at that microbatch (the paper knows no host budget).
        trainerd::PaperShape at_largest = option;
        at_largest.microbatch = std::max(1, largest);
        const std::optional<trainerd::HostLedger> host =
            model.Ledger(at_largest, device, usable).host;
        fits.push_back(
            {{"precision", trainerd::ToString(precision)},
             {"checkpoint", option.checkpoint_all ? "all" : "none"},
             {"offload_activations", option.offload_activations},
             {"optimizer_state", trainerd::ToString(placement)},
             {"zero_stage", zero_stage},
             {"step_in_backward", in_backward},
             {"output_chunk", option.output_chunk},
             {"largest_microbatch", largest},
             {"peak_bytes_at_microbatch_1", model.Ledger(option, device, usable).peak_bytes},
             {"host_bytes_at_largest", host ? host->peak_bytes : 0}});
      }
    }
  }
  return fits;
}

void PrintPaperFits(const nlohmann::json& fits, int ranks) {
  const std::string sharded = "sharded over " + std::to_string(ranks);
  for (const nlohmann::json& fit : fits) {
    const int chunk = fit["output_chunk"].get<int>();
    std::printf(
        "%-10s %-18s %-24s %-13s %10d %16s %16s\n", fit["precision"].get<std::string>().c_str(),
        fit["checkpoint"] == "all"               ? "every layer"
        : fit["offload_activations"].get<bool>() ? "none, on the host"
                                                 : "none",
        fit["zero_stage"] == 1                ? sharded.c_str()
        : fit["optimizer_state"] == "host"    ? "on the host"
        : fit["step_in_backward"].get<bool>() ? "stepped in the backward"
                                              : "on the device",
        chunk == 0 ? "whole" : std::to_string(chunk).c_str(), fit["largest_microbatch"].get<int>(),
        trainerd::FormatBytes(fit["peak_bytes_at_microbatch_1"].get<std::int64_t>()).c_str(),
        trainerd::FormatBytes(fit["host_bytes_at_largest"].get<std::int64_t>()).c_str());
  }
}

// --what-if --model DIR: the paper ledger at the asked shape, then what fits.
int RunPaperLedger(const Args& args) {
  for (const char* flag : {"--static", "--act-per-sample", "--blocks"}) {
    if (args.what_if_values.count(flag) != 0) {
      throw UsageError(std::string(flag) +
                       " does not go with --model (the model's layers are "
                       "its blocks, its config.json gives the sizes)");
    }
  }
  const std::string folder = args.what_if_values.at("--model");
  trainerd::Result<trainerd::PaperModel> model = trainerd::PaperModel::Read(folder);
  if (!model.ok()) {
    std::cerr << "trainer-run: " << model.status().message() << "\n";
    return exit_code::kUsage;
  }
  const std::int64_t device = SizeFlag(args, "--device", true);
  const std::int64_t usable = trainerd::MemorySpec{device, ReserveFlag(args)}.usable_bytes();
  trainerd::PaperShape shape;
  shape.block_size = CountFlag(args, "--block", std::min(model->max_positions(), 2048), 1 << 20);
  shape.microbatch = CountFlag(args, "--microbatch", 1, 1 << 16);
  shape.accumulation_steps = CountFlag(args, "--accumulation", 1, 1 << 16);
  if (auto it = args.what_if_values.find("--precision"); it != args.what_if_values.end()) {
    const std::optional<trainerd::Precision> precision =
        trainerd::kPrecisionNames.Parse(it->second);
    if (!precision)
      throw UsageError("--precision: expected fp32, bf16 or fp16, got '" + it->second + "'");
    shape.precision = *precision;
  }
  if (auto it = args.what_if_values.find("--checkpoint"); it != args.what_if_values.end()) {
    if (it->second != "none" && it->second != "all")
      throw UsageError("--checkpoint: expected none or all, got '" + it->second + "'");
    shape.checkpoint_all = it->second == "all";
  }
  if (auto it = args.what_if_values.find("--optimizer-state"); it != args.what_if_values.end()) {
    const std::optional<trainerd::StatePlacement> placement =
        trainerd::kStatePlacementNames.Parse(it->second);
    if (!placement)
      throw UsageError("--optimizer-state: expected device or host, got '" + it->second + "'");
    shape.optimizer_state = *placement;
  }
  shape.ranks = CountFlag(args, "--ranks", 1, 1 << 16);
  const auto chunk = args.what_if_values.find("--output-chunk");
  const bool planned_chunk = chunk == args.what_if_values.end() || chunk->second == "auto";
  if (!planned_chunk) shape.output_chunk = ParseCount("--output-chunk", chunk->second, 0, 1 << 30);
  shape.step_in_backward = args.what_if_values.count("--step-in-backward") != 0;
  if (shape.step_in_backward) {  // the plan's rule (a Hugging Face model's loss is counted)
    trainerd::PlanSpec plan{
        shape.microbatch, shape.accumulation_steps, {}, shape.precision, shape.optimizer_state};
    trainerd::DistributedSpec distributed;
    if (args.what_if_values.count("--zero-stage") != 0) distributed.ranks = shape.ranks;
    if (const auto refusal =
            trainerd::StepInBackwardRefusal(plan, trainerd::ModelSpec{}, distributed)) {
      // Its expectation reads "false with ...": the flag does not go with it.
      throw UsageError(
          "--step-in-backward steps each parameter on the device after the backward of an "
          "update's only microbatch: it does not go " +
          refusal->substr(std::string_view("false ").size()));
    }
  }
  shape.offload_activations = args.what_if_values.count("--offload-activations") != 0;
  if (shape.offload_activations && shape.checkpoint_all) {
    throw UsageError(
        "--offload-activations keeps the activations of the layers not checkpointed on the "
        "host: with --checkpoint all there are none");
  }
  if (auto it = args.what_if_values.find("--zero-stage"); it != args.what_if_values.end()) {
    shape.zero_stage = ParseCount("--zero-stage", it->second, 0, 2);
    if (shape.zero_stage > 0 && shape.ranks == 1)
      throw UsageError("--zero-stage shards over data-parallel ranks: it needs --ranks N above 1");
    if (shape.zero_stage > 0 && shape.optimizer_state == trainerd::StatePlacement::kHost)
      throw UsageError("--zero-stage does not go with --optimizer-state host");
  }
  shape.libtorch =
      TORCH_VERSION_MAJOR >= 2 ? trainerd::PaperLibTorch::k2 : trainerd::PaperLibTorch::k1;
  if (args.what_if_values.count("--lora-rank") != 0) {
    trainerd::FinetuneSpec adapters;
    adapters.method = trainerd::FinetuneMethod::kLora;
    adapters.rank = CountFlag(args, "--lora-rank", 8, 65536);
    adapters.targets = model->DefaultAdapterTargets();
    if (auto it = args.what_if_values.find("--lora-base"); it != args.what_if_values.end()) {
      if (it->second != "fp32" && it->second != "bf16")
        throw UsageError("--lora-base: expected fp32 or bf16, got '" + it->second + "'");
      adapters.base_dtype = *trainerd::kPrecisionNames.Parse(it->second);
    }
    if (auto it = args.what_if_values.find("--lora-targets"); it != args.what_if_values.end()) {
      adapters.targets.clear();
      std::stringstream list(it->second);
      for (std::string target; std::getline(list, target, ',');) {
        if (!target.empty()) adapters.targets.push_back(target);
      }
    }
    if (trainerd::Result<std::int64_t> n = model->AdapterParameters(adapters); !n.ok()) {
      throw UsageError("--lora-targets: " + n.status().message());
    }
    shape.adapters = adapters;
  } else if (args.what_if_values.count("--lora-targets") != 0 ||
             args.what_if_values.count("--lora-base") != 0) {
    throw UsageError("--lora-targets and --lora-base go with --lora-rank R");
  }
  if (planned_chunk) shape.output_chunk = PlannedOutputChunk(*model, shape, usable);
  const trainerd::MemoryLedger ledger = model->Ledger(shape, device, usable);
  const nlohmann::json fits = PaperFits(*model, shape, planned_chunk, device, usable);
  // Full training that fits nowhere: what rank-16 adapters on the family's usual layers need.
  nlohmann::json recommendation;
  const bool nothing_fits = std::all_of(fits.begin(), fits.end(), [](const nlohmann::json& fit) {
    return fit["largest_microbatch"] == 0;
  });
  if (nothing_fits && !shape.adapters) {
    trainerd::PaperShape adapted = shape;
    adapted.adapters =
        trainerd::FinetuneSpec{trainerd::FinetuneMethod::kLora, kRecommendedRank,
                               2.0 * kRecommendedRank,          0.0,
                               trainerd::Precision::kBf16,      model->DefaultAdapterTargets()};
    recommendation = {{"rank", kRecommendedRank},
                      {"base_dtype", "bf16"},
                      {"targets", adapted.adapters->targets},
                      {"fits", PaperFits(*model, adapted, planned_chunk, device, usable)}};
  }
  if (args.json) {
    nlohmann::json paper = {{"architecture", model->architecture()},
                            {"parameters", model->parameters()},
                            {"block_size", shape.block_size},
                            {"ledger", trainerd::ToJson(ledger)},
                            {"fits", fits}};
    if (!recommendation.is_null()) paper["adapters_recommendation"] = recommendation;
    std::cout << nlohmann::json{{"paper_ledger", paper}}.dump() << std::endl;
    return exit_code::kOk;
  }
  std::printf("%s, %.3f billion parameters (%s/config.json); %s\n", model->architecture().c_str(),
              static_cast<double>(model->parameters()) / 1e9, folder.c_str(),
              ledger.method.c_str());
  std::printf(
      "block %d, microbatch %d x %d, %s, checkpointing %s, output layer %s:\n\n", shape.block_size,
      shape.microbatch, shape.accumulation_steps, trainerd::ToString(shape.precision),
      shape.checkpoint_all        ? "every layer"
      : shape.offload_activations ? "none, activations on the host"
                                  : "none",
      shape.output_chunk == 0 ? "whole"
                              : ("in chunks of " + std::to_string(shape.output_chunk)).c_str());
  std::cout << trainerd::LedgerTable(ledger);
  std::printf(
      "\nlargest microbatch within %s usable, at block %d:\n%-10s %-18s %-24s %-13s %10s %16s "
      "%16s\n",
      trainerd::FormatBytes(usable).c_str(), shape.block_size, "precision", "checkpointing",
      "optimizer state", "output chunk", "microbatch", "peak at 1", "host at largest");
  PrintPaperFits(fits, shape.ranks);
  if (!recommendation.is_null()) {
    std::string targets;
    for (const nlohmann::json& t : recommendation["targets"]) {
      targets += (targets.empty() ? "" : ", ") + t.get<std::string>();
    }
    std::printf(
        "\nfull training fits nowhere on this device. With rank-%d adapters on %s and the frozen "
        "base's linear weights in bf16 (the job's finetune: {method: lora, rank: %d, base_dtype: "
        "bf16, targets: [%s]}):\n",
        kRecommendedRank, targets.c_str(), kRecommendedRank, targets.c_str());
    PrintPaperFits(recommendation["fits"], shape.ranks);
  }
  return exit_code::kOk;
}

int RunWhatIf(const Args& args) {
  if (args.what_if_values.count("--model") != 0) return RunPaperLedger(args);
  for (const char* flag :
       {"--block", "--accumulation", "--precision", "--checkpoint", "--optimizer-state", "--ranks",
        "--zero-stage", "--lora-rank", "--lora-targets", "--lora-base", "--output-chunk",
        "--step-in-backward", "--offload-activations"}) {
    if (args.what_if_values.count(flag) != 0)
      throw UsageError(std::string(flag) + " only goes with --what-if --model DIR");
  }
  trainerd::WhatIfInput input;
  input.static_bytes = SizeFlag(args, "--static", true);
  input.activation_bytes_per_sample = SizeFlag(args, "--act-per-sample", true);
  input.device_bytes = SizeFlag(args, "--device", true);
  input.reserve_fraction = ReserveFlag(args);
  input.microbatch = CountFlag(args, "--microbatch", 0, 1 << 24);
  input.blocks = CountFlag(args, "--blocks", 1, 1 << 20);
  trainerd::Result<trainerd::WhatIfResult> result = trainerd::ComputeWhatIf(input);
  if (!result.ok()) throw UsageError(result.status().message());
  if (args.json) {
    std::cout << result->ToJson().dump() << std::endl;
  } else {
    std::cout << result->ToText(input);
  }
  return exit_code::kOk;
}

void PrintParity(const trainerd::ParityReport& report) {
  const trainerd::PlanSpec& plan = report.plan;
  const trainerd::PlanSpec& checked = report.checked_plan;
  std::printf(
      "parity of plan microbatch %d x %d, checkpoint %zu blocks, %s against the fp32 "
      "large-batch reference:\n",
      plan.microbatch, plan.accumulation_steps, plan.checkpoint_blocks.size(),
      trainerd::ToString(plan.precision));
  if (!report.reduction.empty()) {
    std::printf("  reduced to fit: effective batch %d as %d x %d (%s)\n",
                report.checked_effective_batch, checked.microbatch, checked.accumulation_steps,
                report.reduction.value("why", "").c_str());
  }
  for (const trainerd::ParityComparison& c : report.comparisons) {
    std::printf(
        "  %s %s, %zu updates (relative differences; gradient, tensor step: worst "
        "tensor)\n",
        trainerd::ToString(c.precision), c.judges.c_str(), c.updates.size());
    std::printf("  %-7s %-10s %-10s %-10s %-10s %-11s %s\n", "update", "loss", "grad norm",
                "gradient", "step", "tensor step", "worst tensor (gradient, step)");
    for (std::size_t i = 0; i < c.updates.size(); ++i) {
      const trainerd::ParityUpdate& u = c.updates[i];
      std::printf(
          "  %-7zu %-10.3g %-10.3g %-10.3g %-10.3g %-11.3g %s%s, %s\n", i + 1,
          std::fabs(u.loss.plan - u.loss.reference) / std::fabs(u.loss.reference),
          std::fabs(u.grad_norm.plan - u.grad_norm.reference) / std::fabs(u.grad_norm.reference),
          u.gradient_diff, u.step_diff, u.worst_tensor_step_diff,
          u.skipped ? "(the plan's fp16 loss scaler skipped it; replayed, no step) " : "",
          u.gradient_parameter.c_str(), u.worst_tensor_step_parameter.c_str());
    }
    const trainerd::ParityTolerances& t = c.tolerances;
    std::printf("  %-7s %-10.3g %-10.3g %-10.3g %-10.3g %-11.3g\n", "limit", t.loss, t.grad_norm,
                t.gradient, t.step, t.tensor_step);
    std::printf("  largest difference: %.3g of its limit (%s)\n", c.worst_ratio,
                c.worst_check.c_str());
  }
  if (report.own_dropout_switched_off > 0) {
    std::printf(
        "  the model's own %d dropout modules were switched off on both sides (their "
        "masks depend on the split)\n",
        report.own_dropout_switched_off);
  }
  for (const std::string& failure : report.failures) std::printf("  %s\n", failure.c_str());
  std::printf("%s\n", report.pass ? "PASS" : "FAIL");
}

// One invocation on a job spec: load it, then print a report or train. Each step returns the
// process's exit code when it ends the invocation.
class Worker {
 public:
  explicit Worker(Args args) : args_(std::move(args)) {
    if (args_.json) {
      sink_ = std::make_unique<trainerd::JsonLinesSink>(stdout);
    } else {
      sink_ = std::make_unique<trainerd::TerminalProgress>(stdout);
    }
  }

  int Run() {
    const trainerd::OutOfMemoryWatch out_of_memory;
    try {
      if (std::optional<int> code = ReadRankEnvironment()) return *code;
      if (std::optional<int> code = LoadJob()) return *code;
      if (std::optional<int> code = CheckRanks()) return *code;
      if (std::optional<int> code = Report()) return *code;
      return Train();
    } catch (const std::exception& e) {
      if (out_of_memory.IsOutOfMemory(e)) {
        return Fail("oom", trainerd::ModelErrorReason(e), exit_code::kOutOfMemory);
      }
      return Fail("internal", e.what(), exit_code::kInternal);
    }
  }

 private:
  int Fail(const char* kind, const std::string& message, int code,
           const std::optional<trainerd::FailureDetails>& details = std::nullopt) {
    sink_->Emit(trainerd::ErrorEvent{kind, message, details, phase_});
    if (args_.json || rank_.rank != 0) std::cerr << RankName() << ": " << message << "\n";
    return code;
  }

  // A measurement's failure (the ledger, the planner, the parity check, the profile): out of
  // memory (exit 4) or internal (exit 1).
  int FailMeasuring(const trainerd::Status& status) {
    const bool oom = status.code() == trainerd::Status::Code::kOutOfMemory;
    return Fail(oom ? "oom" : "internal", status.message(),
                oom ? exit_code::kOutOfMemory : exit_code::kInternal);
  }

  std::string RankName() const {
    if (rank_.world_size == 1) return "trainer-run";
    return "trainer-run rank " + std::to_string(rank_.rank) + "/" +
           std::to_string(rank_.world_size);
  }

  // Where this process stands in a data-parallel job (its launcher's environment). A rank
  // other than 0 emits no events: it reports its errors on stderr.
  std::optional<int> ReadRankEnvironment() {
    trainerd::Result<trainerd::RankEnvironment> env = trainerd::RankEnvironmentFrom(::getenv);
    if (!env.ok()) return Fail("config", env.status().message(), exit_code::kUsage);
    rank_ = *env;
    if (rank_.rank != 0) sink_ = std::make_unique<trainerd::NullEventSink>();
    return std::nullopt;
  }

  // A launcher's world must be the job's distributed.ranks (the plan is per rank); a job of
  // several ranks trains only under a launcher, and the reports run without one.
  std::optional<int> CheckRanks() {
    const int ranks = spec_.distributed.ranks;
    const bool report = args_.ledger || args_.plan_only || args_.parity || args_.profile ||
                        args_.device_info || args_.data_profile;
    if (!rank_.launcher.empty() && rank_.world_size > 1 && report) {
      return Fail("config",
                  "--ledger, --plan-only, --parity, --profile and --device-info measure one "
                  "rank's share in one process: run them without a launcher",
                  exit_code::kUsage);
    }
    if (report || rank_.world_size == ranks) return std::nullopt;
    if (rank_.launcher.empty()) {
      return Fail("config",
                  args_.config + ": distributed.ranks: " + std::to_string(ranks) + " trains as " +
                      std::to_string(ranks) +
                      " processes: start them with trainer-launch --ranks " +
                      std::to_string(ranks) + " -- trainer-run ..., torchrun or srun",
                  exit_code::kUsage);
    }
    return Fail("config",
                rank_.launcher + " started " + std::to_string(rank_.world_size) + " ranks but " +
                    args_.config + " has distributed.ranks: " + std::to_string(ranks) +
                    " (the plan is per rank: they must agree)",
                exit_code::kUsage);
  }

  // The spec with --budget and --plan FILE applied, the device, the threads and the corpus.
  std::optional<int> LoadJob() {
    phase_ = "load";
    trainerd::Result<trainerd::JobSpec> spec =
        trainerd::ParseJobSpecFile(args_.config, args_.base_dir);
    if (!spec.ok()) return Fail("config", spec.status().message(), exit_code::kUsage);
    spec_ = std::move(spec).value();
    if (!args_.budget.empty()) {
      trainerd::Result<std::int64_t> budget = trainerd::ParseBytes(args_.budget);
      if (!budget.ok()) {
        return Fail("config", "--budget: " + budget.status().message(), exit_code::kUsage);
      }
      spec_.memory.budget_bytes = *budget;
    }
    FixBlasCore();
    if (spec_.runtime.device == "cuda" && !torch::cuda::is_available()) {
      return Fail("config",
                  args_.config + ": runtime.device: cuda requested but this LibTorch (" +
                      TORCH_VERSION + ") sees no CUDA device; use device: cpu",
                  exit_code::kUsage);
    }
    device_ = spec_.runtime.device == "cuda" ? torch::kCUDA : torch::kCPU;
    if (args_.device_info) return std::nullopt;  // needs neither threads nor data
    trainerd::ConfigureRuntime(spec_.runtime, rank_.local_world_size);
    trainerd::Result<std::unique_ptr<trainerd::Dataset>> data = trainerd::LoadDataset(
        spec_.data, spec_.model.block_size, trainerd::UserCacheDir() + "/data_digests.json");
    if (!data.ok()) return Fail("data", data.status().message(), exit_code::kBadData);
    corpus_ = std::move(*data);
    // The model's blocks are known once it is built (the team's own from its file): before the
    // plan file that may name them. Its outputs are checked on a sample of the data.
    // The data profile needs the model's vocabulary: declared by its keys (a Hugging Face
    // folder's config.json) or told by a forward on a sample, never loaded weights for it.
    const bool declared = trainerd::ModelKindOf(spec_.model).Outputs(spec_.model).has_value();
    if (args_.data_profile && declared) return std::nullopt;
    if (trainerd::Status s = trainerd::ResolveModel(&spec_, *corpus_); !s.ok()) {
      if (s.code() == trainerd::Status::Code::kOutOfMemory) return FailMeasuring(s);
      return Fail("model", s.message(), exit_code::kUsage);
    }
    if (args_.data_profile) return std::nullopt;  // ids the model cannot read are its findings
    if (trainerd::Status s = trainerd::CheckModelFitsData(spec_.model, args_.config, *corpus_);
        !s.ok()) {
      return Fail("data", s.message(), exit_code::kBadData);
    }
    if (trainerd::Status s = trainerd::ResolveInitialWeights(
            args_.init_from, static_cast<int>(corpus_->slices().size()), &spec_);
        !s.ok()) {
      return Fail("config", s.message(), exit_code::kUsage);
    }
    if (!args_.plan.empty() && args_.plan != "auto") {
      if (trainerd::Status s = trainerd::ApplyPlanFile(args_.plan, &spec_); !s.ok()) {
        return Fail("config", s.message(), exit_code::kUsage);
      }
    }
    return std::nullopt;
  }

  // Before the job's data is read: the worker may restart itself with better BLAS kernels.
  void FixBlasCore() const {
    if (!spec_.runtime.fix_blas_core) return;
    if (const std::optional<std::string> why_not = trainerd::FixBlasCore(
            "/proc/self/exe", args_.argv, trainerd::DescribeThisBlas(), trainerd::ThisCpuIsa())) {
      std::cerr << RankName() << ": warning: " << *why_not << "\n";
    }
  }

  // Every JSON report names the device it was measured on.
  template <typename Report>
  void PrintReport(Report report) const {
    report.device_info = trainerd::DeviceDescription(device_);
    std::cout << trainerd::ToJson(report).dump() << std::endl;
  }

  // --device-info, --ledger, --plan-only, --profile and --parity print a report and end the
  // invocation; --plan auto replaces the plan with the planner's and goes on to train.
  std::optional<int> Report() {
    if (args_.device_info) {
      PrintReport(trainerd::DeviceInfoReport{});
      return exit_code::kOk;
    }
    if (args_.data_profile) {
      PrintDataProfile();
      return exit_code::kOk;
    }
    // The reports plan and measure what one rank trains: its share of the effective batch.
    const trainerd::JobSpec rank_job = trainerd::RankJob(spec_);
    if (args_.ledger) {
      phase_ = "ledger";
      trainerd::Result<trainerd::MemoryLedger> ledger = trainerd::MeasureLedger(rank_job, *corpus_);
      if (!ledger.ok()) return FailMeasuring(ledger.status());
      if (args_.json) {
        PrintReport(*ledger);
      } else {
        std::cout << trainerd::LedgerTable(*ledger);
      }
      return exit_code::kOk;
    }
    if (args_.plan_only || args_.plan == "auto") {
      phase_ = "plan";
      trainerd::Result<trainerd::ChosenPlan> chosen =
          trainerd::PlanJob(rank_job, *corpus_, {.parity_checked = args_.for_parity});
      if (!chosen.ok()) return FailMeasuring(chosen.status());
      if (args_.plan_only) {
        if (args_.json) {
          PrintReport(*chosen);
        } else {
          std::cout << trainerd::PlanText(*chosen);
        }
        return exit_code::kOk;
      }
      spec_.plan = chosen->plan;
      sink_->Emit(trainerd::PlanEvent{*chosen});
    }
    if (args_.profile) {
      phase_ = "profile";
      trainerd::ProfileOptions options;
      options.updates = args_.profile_updates;
      options.trace_path = args_.profile_trace;
      options.peak_flops_cache = trainerd::DefaultPeakFlopsCache();
      trainerd::Result<trainerd::ProfileReport> profile =
          trainerd::ProfileUpdates(rank_job, *corpus_, options);
      if (!profile.ok()) {
        if (profile.status().code() == trainerd::Status::Code::kInvalidArgument) {
          return Fail("config", profile.status().message(), exit_code::kUsage);
        }
        return FailMeasuring(profile.status());
      }
      if (args_.json) {
        PrintReport(*profile);
      } else {
        std::cout << trainerd::ProfileText(*profile);
      }
      return exit_code::kOk;
    }
    if (args_.parity) {
      phase_ = "parity";
      trainerd::Result<trainerd::ParityReport> report =
          trainerd::CheckParity(rank_job, *corpus_, args_.parity_updates, args_.fault);
      if (!report.ok()) return FailMeasuring(report.status());
      if (args_.json) {
        PrintReport(*report);
      } else {
        PrintParity(*report);
      }
      return report->pass ? exit_code::kOk : exit_code::kParityFailed;
    }
    return std::nullopt;
  }

  void PrintDataProfile() const {
    trainerd::DataProfileReport report;
    report.data_fingerprint = corpus_->fingerprint();
    report.profile = corpus_->profile();
    report.vocabulary = trainerd::ModelVocabulary(spec_.model, *corpus_);
    const std::vector<std::int64_t>& counts = report.profile.id_counts;
    if (report.vocabulary > 0) {
      for (auto id = static_cast<std::size_t>(report.vocabulary); id < counts.size(); ++id) {
        report.ids_beyond_vocabulary += counts[id];
      }
    }
    if (args_.json) {
      PrintReport(report);
      return;
    }
    std::int64_t distinct = 0;
    for (const std::int64_t count : counts) distinct += count > 0 ? 1 : 0;
    std::cout << "data " << report.data_fingerprint.substr(0, 12) << ": "
              << report.profile.train_samples << " training samples, " << distinct
              << " distinct ids, " << report.ids_beyond_vocabulary << " ids beyond the vocabulary ("
              << report.vocabulary << "), " << report.profile.rows_not_finite
              << " rows with NaN or Inf, " << report.profile.columns.size() << " columns profiled";
    if (const std::optional<std::int64_t> learned = report.profile.learned_targets) {
      std::cout << ", " << *learned << " of " << report.profile.train_samples - 1
                << " targets learned (loss masks)";
    }
    if (const std::optional<trainerd::DocumentProfile>& documents = report.profile.documents) {
      std::cout << ", " << documents->count << " documents (median " << documents->median_length
                << " ids, longest " << documents->longest << "), padding "
                << 100 * documents->padding_share << " % of the window positions";
    }
    std::cout << "\n";
  }

  int Train() {
    phase_ = "train";
    if (args_.output_dir.empty()) {
      args_.output_dir = "runs/" + std::filesystem::path(args_.config).stem().string();
    }
    std::error_code ec;
    std::filesystem::create_directories(args_.output_dir, ec);
    if (ec) {
      return Fail("io", "cannot create --output-dir " + args_.output_dir + ": " + ec.message(),
                  exit_code::kInternal);
    }
    trainerd::TrainerOptions options;
    options.checkpoint_path = args_.output_dir + "/checkpoint.pt";
    options.model_path = args_.output_dir + "/model.pt";
    options.resume = args_.resume;
    options.stop_requested = &g_stop_requested;
    options.peak_flops_cache = trainerd::DefaultPeakFlopsCache();
    std::signal(SIGTERM, RequestStop);
    std::signal(SIGINT, RequestStop);

    std::unique_ptr<trainerd::DataParallelGroup> group;
    if (rank_.world_size > 1) {
      trainerd::Result<std::unique_ptr<trainerd::DataParallelGroup>> joined =
          trainerd::DataParallelGroup::Join(rank_, device_, spec_.distributed.timeout_seconds);
      if (!joined.ok()) {
        return Fail("distributed", joined.status().message(), exit_code::kInternal);
      }
      group = std::move(*joined);
    }
    trainerd::Trainer trainer(spec_, *corpus_, sink_.get(), group.get());
    trainer.set_test_only_fault(args_.fault);
    trainerd::MemoryOf(trainer.device()).SetLimit(spec_.memory.usable_bytes());
    trainerd::Result<trainerd::TrainOutcome> outcome = trainer.Run(options);
    if (!outcome.ok()) {
      const trainerd::Status& s = outcome.status();
      using Code = trainerd::Status::Code;
      if (s.code() == Code::kNotFound || s.code() == Code::kCorruption ||
          s.code() == Code::kFailedPrecondition) {
        return Fail("checkpoint", s.message(), exit_code::kBadCheckpoint);
      }
      return Fail("internal", s.message(), exit_code::kInternal);
    }
    switch (outcome->kind) {
      case trainerd::TrainOutcome::Kind::kFinished:
        return exit_code::kOk;
      case trainerd::TrainOutcome::Kind::kInterrupted:
        return exit_code::kInterrupted;
      case trainerd::TrainOutcome::Kind::kDiverged:
        return Fail("nan", outcome->message, exit_code::kNonFiniteLoss);
      case trainerd::TrainOutcome::Kind::kOutOfMemory:
        phase_ = outcome->phase;
        return Fail("oom", outcome->message, exit_code::kOutOfMemory, outcome->details);
      case trainerd::TrainOutcome::Kind::kLeak:
        return Fail("leak", outcome->message, exit_code::kLeak, outcome->details);
    }
    return exit_code::kInternal;
  }

  Args args_;
  trainerd::RankEnvironment rank_;  // one process unless a launcher started this one
  std::unique_ptr<trainerd::EventSink> sink_;
  trainerd::JobSpec spec_;
  torch::Device device_ = torch::kCPU;
  std::unique_ptr<trainerd::Dataset> corpus_;  // absent for --device-info
  std::string phase_ = "load";                 // ErrorEvent::phase
};

}  // namespace

// --version: a line for people, or with --json the VersionReport the daemon reads.
int PrintVersion(int argc, char** argv) {
  if (std::find(argv + 1, argv + argc, std::string_view("--json")) == argv + argc) {
    std::cout << "trainer-run " << TRAINERD_VERSION << " (LibTorch " << TORCH_VERSION
              << ", worker protocol " << trainerd::kWorkerProtocolVersion << ")\n";
    return exit_code::kOk;
  }
  trainerd::VersionReport report;
  report.trainer_version = TRAINERD_VERSION;
  report.software = trainerd::SoftwareFingerprint();
  std::cout << trainerd::ToJson(report).dump() << std::endl;
  return exit_code::kOk;
}

// `trainer-run --check-blas`: this process's matrix product against float64, as JSON.
int CheckBlas(int argc) {
  if (argc != 2) {
    std::cerr << "trainer-run: --check-blas takes no other argument\n\n" << kUsage;
    return exit_code::kUsage;
  }
  const trainerd::BlasProductCheck check = trainerd::CheckBlasProduct();
  std::cout << trainerd::BlasProductCheckJson(check) << std::endl;
  return check.ok() ? exit_code::kOk : exit_code::kInternal;
}

int main(int argc, char** argv) {
  // A reader that went away (a daemon that died) must not kill the worker mid-checkpoint:
  // writes to the closed pipe fail instead, and SIGTERM still ends the run cleanly.
  std::signal(SIGPIPE, SIG_IGN);
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") {
      std::cout << kUsage;
      return exit_code::kOk;
    }
    if (std::string(argv[i]) == "--version") return PrintVersion(argc, argv);
    if (std::string(argv[i]) == "--check-blas") return CheckBlas(argc);
  }
  Args args;
  try {
    args = ParseArgs(argc, argv);
    args.argv.assign(argv, argv + argc);
    if (!::isatty(STDOUT_FILENO)) args.json = true;
    if (args.what_if) return RunWhatIf(args);
  } catch (const UsageError& e) {
    std::cerr << "trainer-run: " << e.what() << "\n\n" << kUsage;
    return exit_code::kUsage;
  }
  return Worker(std::move(args)).Run();
}
