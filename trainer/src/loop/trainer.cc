#include "trainerd/trainer/loop/trainer.h"

#include <malloc.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>

#include "loop/adapter_files.h"
#include "loop/model_description.h"
#include "loop/safetensors_writer.h"
#include "trainerd/common/atomic_file.h"
#include "trainerd/common/cpu_count.h"
#include "trainerd/common/sha256.h"
#include "trainerd/trainer/device/device_memory.h"
#include "trainerd/trainer/device/device_timer.h"
#include "trainerd/trainer/device/machine.h"
#include "trainerd/trainer/device/op_scopes.h"
#include "trainerd/trainer/device/weight_decay.h"
#include "trainerd/trainer/evaluation/prediction_tally.h"
#include "trainerd/trainer/evaluation/window_loss_tally.h"
#include "trainerd/trainer/loop/initial_weights.h"
#include "trainerd/trainer/loop/model_state_bytes.h"
#include "trainerd/trainer/loop/throughput.h"
#include "trainerd/trainer/loop/training_checkpoint.h"
#include "trainerd/trainer/models/adapters.h"
#include "trainerd/trainer/models/build_model.h"
#include "trainerd/trainer/semantics/lr_schedule.h"
#include "trainerd/trainer/spec/job_identity.h"
#include "trainerd/trainer/spec/units.h"

namespace trainerd {
namespace {

using Clock = std::chrono::steady_clock;

// Updates excluded from throughput figures: the first ones pay for allocator growth and
// oneDNN kernel generation.
constexpr int kWarmupUpdates = 2;
// fp16 skips in a row that end a run: the scale has fallen from 65536 to 2^-8, so a gradient
// that still overflows fp16 is above 1.6e7: the job diverged, it is not waiting for a scale.
constexpr int kMaxSkipsInARow = 24;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

double MeanLoss(const std::vector<SliceLoss>& slices) {
  double total = 0;
  for (const auto& s : slices) total += s.loss;
  return slices.empty() ? 0 : total / static_cast<double>(slices.size());
}

// The first of the parameters with the fewest elements.
torch::Tensor SmallestParameter(TrainableModel& model) {
  torch::Tensor smallest;
  for (const torch::Tensor& p : TrainableParameters(model)) {
    if (!smallest.defined() || p.numel() < smallest.numel()) smallest = p;
  }
  return smallest;
}

}  // namespace

int ConfigureRuntime(const RuntimeSpec& runtime, int ranks_on_host) {
  constexpr int kHeapBlockLimit = 32 << 20;  // glibc's maximum mmap threshold on 64-bit
  mallopt(M_MMAP_THRESHOLD, kHeapBlockLimit);
  mallopt(M_TRIM_THRESHOLD, 2 * kHeapBlockLimit);
  const int threads =
      runtime.threads > 0 ? runtime.threads : std::max(1, UsableCpuCount() / ranks_on_host);
  torch::set_num_threads(threads);
  return threads;
}

Trainer::Trainer(const JobSpec& spec, const Dataset& corpus, EventSink* sink,
                 DataParallelGroup* group)
    : spec_(spec),
      corpus_(corpus),
      sink_(sink),
      group_(group),
      share_(ShareOfRank(spec.training.effective_batch, world_size(), group ? group->rank() : 0)),
      device_(spec.runtime.device == "cuda" ? torch::kCUDA : torch::kCPU) {
  // On the CPU the first call installs the counting allocator: before the model's tensors
  // exist, or live bytes, every peak and the budget's limit would leave them out.
  MemoryOf(device_);
  SetCpuHostApart(!HostIsTheDevice(spec_));
  torch::manual_seed(spec_.training.seed);
  model_ = BuildModel(spec_.model, static_cast<int>(corpus_.slices().size()), spec_.source_path);
  if (!spec_.init_from.path.empty()) {  // trainer-run checked the file (ResolveInitialWeights)
    const Status loaded = LoadInitialWeights(spec_.init_from.path, model_.get());
    TORCH_CHECK(loaded.ok(), loaded.message());
  }
  const Status adapted = AttachAdapters(spec_, model_.get());  // ResolveModel checked targets
  TORCH_CHECK(adapted.ok(), adapted.message());
  model_->set_checkpointed_blocks(spec_.plan.checkpoint_blocks);
  model_->set_output_chunk(spec_.plan.output_chunk);
  model_->set_offload_activations(spec_.plan.offload_activations);
  model_->to(device_);
  state_ = MakeModelState(spec_, *model_, device_, group_);
  if (spec_.plan.precision == Precision::kFp16) scaler_.emplace();
  job_identity_ = JobIdentity(spec_, corpus_.fingerprint());
}

PrecisionContext Trainer::precision_context() {
  return {spec_.plan.precision, scaler_ ? &*scaler_ : nullptr};
}

MemorySnapshot Trainer::LedgerSnapshot() const {
  const DeviceMemory& memory = MemoryOf(device_);
  MemorySnapshot snapshot;
  for (const auto& p : model_->parameters()) snapshot.parameters_bytes += TensorBytes(p);
  state_->Count(&snapshot);
  snapshot.live_bytes = memory.live_bytes();
  snapshot.peak_bytes = memory.peak_bytes();
  snapshot.reserved_bytes = memory.reserved_bytes();
  snapshot.limit_bytes = memory.limit();
  snapshot.budget_bytes = spec_.memory.budget_bytes;
  snapshot.usable_bytes = spec_.memory.usable_bytes();
  return snapshot;
}

StartEvent Trainer::Start(int resumed_from) const {
  StartEvent start;
  start.protocol_version = kWorkerProtocolVersion;
  start.config = spec_.source_path;
  start.job_identity = job_identity_;
  start.model = {spec_.model.kind, CountParameters(*model_), model_->num_blocks(),
                 spec_.model.block_size};
  start.plan = spec_.plan;
  start.effective_batch = spec_.training.effective_batch;
  start.updates = spec_.training.updates;
  start.seed = spec_.training.seed;
  start.resumed_from_update = resumed_from;
  start.distributed.world_size = world_size();
  if (group_) start.distributed.backend = group_->backend();
  start.distributed.rank_batch = share_.count;
  start.threads = torch::get_num_threads();
  start.device = spec_.runtime.device;
  start.device_info = DeviceDescription(device_);
  start.torch_version = TORCH_VERSION;
  start.software = SoftwareFingerprint();
  start.budget_bytes = spec_.memory.budget_bytes;
  start.usable_bytes = spec_.memory.usable_bytes();
  start.data.fingerprint = corpus_.fingerprint();
  for (const DataSlice& s : corpus_.slices()) {
    start.data.slices.push_back({s.name, s.train_bytes, s.holdout_bytes});
  }
  return start;
}

std::vector<Batch> Trainer::Microbatches(int update) const {
  const TrainingSpec& t = spec_.training;
  // Sample i of the stream is fixed by (seed, i): neither the split into ranks nor into
  // microbatches changes which samples the update sees.
  const std::int64_t first_sample =
      static_cast<std::int64_t>(update) * t.effective_batch + share_.offset;
  std::vector<Batch> microbatches;
  for (std::int64_t done = 0; done < share_.count; done += spec_.plan.microbatch) {
    const std::int64_t count = std::min<std::int64_t>(spec_.plan.microbatch, share_.count - done);
    Batch batch =
        corpus_.TrainingSamples(t.seed, first_sample + done, count, model_->sample_format());
    batch.inputs = batch.inputs.to(device_);
    batch.targets = batch.targets.to(device_);
    microbatches.push_back(std::move(batch));
  }
  return microbatches;
}

void Trainer::set_test_only_fault(TrainingFault fault) {
  // The faults act on one process's gradients and steps; a sharded rank holds a shard of them.
  TORCH_CHECK(fault == TrainingFault::kNone || state_->sharding() == nullptr,
              "a test-only fault does not go with a sharded plan (plan.zero_stage)");
  // The step inside the backward leaves no gradient after it for the others to act on.
  TORCH_CHECK(!spec_.plan.step_in_backward || fault == TrainingFault::kNone ||
                  fault == TrainingFault::kStepBeforeClip ||
                  fault == TrainingFault::kChunkDropsAToken ||
                  fault == TrainingFault::kRecomputeFreshRng ||
                  fault == TrainingFault::kOffloadRestoredStale,
              "the test-only fault ", ToString(fault), " does not go with plan.step_in_backward");
  fault_ = fault;
  model_->set_test_only_fault(fault);
}

UpdateStats Trainer::TrainUpdate(int update, const AfterForward& after_forward) {
  return Update(update, after_forward, /*take_step=*/true);
}

UpdateStats Trainer::ReplaySkip(int update) {
  TORCH_CHECK(!scaler_, "ReplaySkip: a trainer with a loss scaler skips by its own overflows");
  return Update(update, {}, /*take_step=*/false);
}

UpdateStats Trainer::Update(int update, const AfterForward& after_forward, bool take_step) {
  const TrainingSpec& t = spec_.training;
  UpdateStats stats;
  const int schedule_step =
      fault_ == TrainingFault::kLrPerMicrobatch ? update * spec_.plan.accumulation_steps : update;
  stats.lr = LearningRateAt(spec_.optimizer, spec_.schedule, schedule_step, t.updates);
  for (auto& group : state_->optimizer().param_groups()) {
    static_cast<torch::optim::AdamWOptions&>(group.options()).lr(stats.lr);
  }
  const std::vector<Batch> microbatches = Microbatches(update);
  ZeroGradients(model_->parameters());
  AccumulationHooks hooks{after_forward, {}, fault_};
  if (fault_ != TrainingFault::kNone) {
    hooks.after_backward = [&](std::size_t index) {
      if (index + 1 < microbatches.size()) CommitMicrobatchFault(stats.lr);
    };
  }
  stats.loss = state_->Backward(
      [&] {
        return AccumulateGradients(*model_, microbatches, precision_context(), hooks, group_,
                                   state_->sharding());
      },
      StepOptionsWith(before_clip_), take_step);
  if (!std::isfinite(stats.loss)) return stats;  // the caller stops; no step on a diverged loss
  if ((fault_ == TrainingFault::kInfGradient && update >= 1) ||
      (fault_ == TrainingFault::kOverflowFirstUpdate && update == 0)) {
    torch::NoGradGuard no_grad;
    TrainableParameters(*model_).front().grad().view(-1)[0] =
        std::numeric_limits<double>::infinity();
  }
  // kFrozenParameter: the smallest tensor is put back as it was before the step.
  const torch::Tensor frozen =
      fault_ == TrainingFault::kFrozenParameter ? SmallestParameter(*model_) : torch::Tensor();
  const torch::Tensor frozen_value = frozen.defined() ? frozen.detach().clone() : torch::Tensor();
  const StepResult step = [&] {
    RECORD_USER_SCOPE(kOptimizerScope);  // the op profiler's "optimizer" group
    return take_step ? state_->Step(StepOptionsWith(before_clip_))
                     : state_->MeasureSkipped(before_clip_);
  }();
  if (frozen.defined()) {
    const torch::NoGradGuard no_grad;
    frozen.copy_(frozen_value);
  }
  stats.grad_norm = step.grad_norm;
  stats.skipped = step.skipped;
  stats.nonfinite_gradient = step.nonfinite_gradient;
  return stats;
}

StepOptions Trainer::StepOptionsWith(const BeforeClip& before_clip) {
  return {spec_.training.grad_clip, precision_context(), before_clip, fault_};
}

void Trainer::CommitMicrobatchFault(double lr) {
  switch (fault_) {
    case TrainingFault::kStepPerMicrobatch:
      state_->Step(StepOptionsWith({}));
      ZeroGradients(model_->parameters());
      return;
    case TrainingFault::kClipPerMicrobatch:
      torch::nn::utils::clip_grad_norm_(TrainableParameters(*model_), spec_.training.grad_clip);
      return;
    case TrainingFault::kWeightDecayPerMicrobatch: {  // what AdamW's step does once
      const torch::NoGradGuard no_grad;
      for (torch::Tensor& p : TrainableParameters(*model_))
        if (DecaysWeight(p)) p.mul_(1 - lr * spec_.optimizer.weight_decay);
      return;
    }
    default:
      return;  // the other faults act elsewhere
  }
}

std::vector<SliceLoss> Trainer::Evaluate() {
  torch::NoGradGuard no_grad;
  model_->eval();
  std::vector<SliceLoss> losses;
  // In microbatches of the plan's size: the whole held-out set at once made the first
  // evaluation of a large vocabulary the run's peak (its fp32 logits, twice). Sums over
  // samples, so the split changes nothing but the order of additions.
  const std::int64_t microbatch = spec_.plan.microbatch;
  for (std::size_t i = 0; i < corpus_.slices().size(); ++i) {
    const Batch batch =
        corpus_.HeldOutSamples(i, spec_.data.eval_windows_per_slice, model_->sample_format());
    const std::int64_t samples = batch.inputs.size(0);
    double sum = 0;
    std::int64_t count = 0;
    std::int64_t classes = 0;
    PredictionTally predictions(spec_.model.loss);
    WindowLossTally windows(spec_.model.loss, samples,
                            samples == 0 ? 1 : batch.targets.numel() / samples);
    // The tallies see the outputs as the loss does: with the plan's output chunk, a chunk's
    // logits at a time.
    const OutputsObserver tally = [&](const torch::Tensor& outputs, const torch::Tensor& targets) {
      predictions.Add(outputs, targets);
      windows.Add(outputs, targets);
      classes = outputs.dim() == 0 ? 1 : outputs.size(-1);
    };
    for (std::int64_t start = 0; start < samples; start += microbatch) {
      const std::int64_t size = std::min(microbatch, samples - start);
      const LossTerms terms = model_->ForwardLoss(RowsOf(batch, start, size, device_), tally);
      sum += terms.sum.item<double>();
      count += terms.count;
    }
    losses.push_back({corpus_.slices()[i].name, sum / static_cast<double>(count),
                      BaselineLoss(i, batch.targets, classes), predictions.Result(),
                      windows.Result()});
  }
  model_->train();
  return losses;
}

std::optional<double> Trainer::BaselineLoss(std::size_t slice, const torch::Tensor& targets,
                                            std::int64_t classes) {
  if (classes <= 0) return std::nullopt;  // no outputs seen: loss only, or no held-out samples
  if (!baseline_fitted_) {
    baseline_ = SimpleBaseline::Fit(spec_.model.loss, corpus_, model_->sample_format(),
                                    spec_.training.seed, classes);
    baseline_fitted_ = true;
  }
  if (!baseline_) return std::nullopt;
  auto [scored, inserted] = baseline_losses_.try_emplace(slice, 0.0);
  if (inserted) {
    const LossTerms terms = baseline_->Loss(targets);
    scored->second = terms.sum.item<double>() / static_cast<double>(terms.count);
  }
  return scored->second;
}

Result<Trainer::ResumePoint> Trainer::ResumeFrom(const TrainerOptions& options) {
  ResumePoint point;
  if (options.resume == Resume::kNo) return point;
  Result<CheckpointState> state = state_->LoadCheckpoint(options.checkpoint_path, job_identity_);
  // Missing, or another job's (refused before any tensor is loaded): start afresh.
  const bool ignorable =
      !state.ok() && (state.status().code() == Status::Code::kNotFound ||
                      state.status().code() == Status::Code::kFailedPrecondition);
  if (options.resume == Resume::kIfCompatible && ignorable) {
    point.warnings.push_back(
        {"checkpoint_ignored", state.status().message() + "; starting from update 0"});
    return point;
  }
  // A damaged checkpoint would fail every later attempt the same way (each night's too):
  // kept aside for inspection, never deleted, and the job starts afresh.
  if (options.resume == Resume::kIfCompatible && !state.ok() &&
      state.status().code() == Status::Code::kCorruption) {
    if (!leader()) return point;  // rank 0 keeps it aside and says so
    const std::string kept = options.checkpoint_path + ".corrupt";
    std::error_code ec;
    std::filesystem::rename(options.checkpoint_path, kept, ec);
    if (ec) return state.status();
    point.warnings.push_back({"checkpoint_corrupt", state.status().message() + "; kept as " + kept +
                                                        ", starting from update 0"});
    return point;
  }
  if (!state.ok()) return state.status();
  point.updates_done = state->updates_done;
  model_->to(device_);  // loading may have replaced parameter storage with host tensors
  if (scaler_ && state->loss_scale) scaler_->Restore(*state->loss_scale, state->clean_updates);
  const std::string here = c10::DeviceTypeName(device_.type(), /*lower_case=*/true);
  if (state->written_on != here) {
    point.warnings.push_back({"checkpoint_device_changed",
                              "checkpoint written on " + state->written_on + ", resumed on " +
                                  here + ": parameters and AdamW state moved to " + here +
                                  "; dropout masks from here on come from the " + here +
                                  " generator"});
  }
  return point;
}

Status Trainer::CheckRanksAgree(int updates_done) {
  if (group_ == nullptr) return Status::Ok();
  const double sum = group_->Sum(updates_done);
  if (sum == static_cast<double>(updates_done) * group_->world_size()) return Status::Ok();
  return Status::FailedPrecondition(
      "rank " + std::to_string(group_->rank()) + " resumed from update " +
      std::to_string(updates_done) + " but the ranks' mean is " +
      std::to_string(sum / group_->world_size()) +
      ": the ranks read different checkpoints (is the output directory shared?)");
}

bool Trainer::StopRequested(const TrainerOptions& options) {
  const bool here = options.stop_requested != nullptr && options.stop_requested->load();
  return group_ == nullptr ? here : group_->Any(here);
}

std::optional<int> Trainer::TrainUntilStepped(int first) {
  for (int update = first; update < first + kMaxSkipsInARow; ++update) {
    if (!TrainUpdate(update).skipped) return update + 1;
  }
  return std::nullopt;
}

std::optional<std::string> Trainer::TooManySkipsInARow(int in_a_row, int update) const {
  if (in_a_row < kMaxSkipsInARow) return std::nullopt;
  return "the fp16 loss scaler skipped " + std::to_string(in_a_row) +
         " updates in a row, through update " + std::to_string(update + 1) + " (" + LossScaleNow() +
         "): the gradients overflow at every scale, nothing was trained since update " +
         std::to_string(update + 1 - in_a_row) +
         ". Lower optimizer.lr, check the data, or train in bf16 or fp32";
}

std::optional<std::string> Trainer::SkippedTooMuch(int in_a_row, int update, int first,
                                                   int updates) const {
  if (std::optional<std::string> why = TooManySkipsInARow(in_a_row, update)) return why;
  if (in_a_row > 0 && update + 1 == updates && in_a_row == updates - first) {
    return "the fp16 loss scaler skipped every one of this run's " + std::to_string(in_a_row) +
           " updates (" + LossScaleNow() +
           "): nothing was trained. Lower optimizer.lr, check the data, "
           "or train in bf16 or fp32";
  }
  return std::nullopt;
}

std::string Trainer::LossScaleNow() const {
  const int exponent = scaler_ ? static_cast<int>(std::log2(scaler_->scale())) : 0;
  return "its loss scale is now 2^" + std::to_string(exponent);
}

// Wall-clock bookkeeping of one Run(): throughput counts the updates after the warm-up.
struct Trainer::RunTiming {
  explicit RunTiming(int first_update) : first(first_update) {}
  void Count(int update, double seconds) {
    if (update - first < kWarmupUpdates) return;
    ++measured_updates;
    measured_seconds += seconds;
  }
  double ElapsedSeconds() const { return Seconds(Clock::now() - started); }

  const Clock::time_point started = Clock::now();
  const int first;
  double measured_seconds = 0;  // update time after warm-up, evals and checkpoints excluded
  int measured_updates = 0;
};

void Trainer::EmitStart(const ResumePoint& resumed) {
  const StartEvent start = Start(resumed.updates_done);
  sink_->Emit(start);
  for (const WarningEvent& warning : resumed.warnings) sink_->Emit(warning);
  if (start.device_info.blas_below_cpu) {
    sink_->Emit(WarningEvent{"blas_below_cpu", *start.device_info.blas_below_cpu});
  }
  if (model_->has_batch_statistics() && spec_.plan.accumulation_steps > 1) {
    sink_->Emit(WarningEvent{"batch_norm_accumulation",
                             "the model normalises over each microbatch (BatchNorm): with " +
                                 std::to_string(spec_.plan.accumulation_steps) +
                                 " accumulation steps its statistics cover " +
                                 std::to_string(spec_.plan.microbatch) +
                                 " samples, not the effective batch of " +
                                 std::to_string(spec_.training.effective_batch) +
                                 ", so accumulation is not equivalent to one large batch"});
  }
}

Status Trainer::SaveCheckpoint(const TrainerOptions& options, int updates_done,
                               const char* reason) {
  // Sharded: every rank's part of the optimizer state, gathered on every rank.
  const std::unique_ptr<torch::optim::AdamW> gathered = state_->GatheredOptimizer();
  if (!leader()) return Status::Ok();
  CheckpointState state{updates_done, job_identity_, std::nullopt, 0};
  if (scaler_) {
    state.loss_scale = scaler_->scale();
    state.clean_updates = scaler_->clean_updates();
  }
  Status s = SaveTrainingCheckpoint(options.checkpoint_path, *model_,
                                    gathered ? *gathered : state_->optimizer(), state, device_);
  if (s.ok()) {
    sink_->Emit(CheckpointEvent{updates_done, options.checkpoint_path, reason});
  }
  return s;
}

void Trainer::EmitUpdate(const UpdateStats& stats, int updates_done, double update_seconds,
                         const RunTiming& timing) {
  const int updates = spec_.training.updates;
  const double mean_update = timing.measured_updates > 0
                                 ? timing.measured_seconds / timing.measured_updates
                                 : update_seconds;
  const double samples_per_second = spec_.training.effective_batch / update_seconds;
  UpdateEvent event;
  event.update = updates_done;
  event.updates = updates;
  event.loss = stats.loss;
  event.lr = stats.lr;
  if (std::isfinite(stats.grad_norm)) event.grad_norm = stats.grad_norm;
  event.skipped = stats.skipped;
  event.update_seconds = update_seconds;
  event.samples_per_second = samples_per_second;
  event.tokens_per_second = samples_per_second * corpus_.window();
  event.live_bytes = MemoryOf(device_).live_bytes();
  event.elapsed_seconds = timing.ElapsedSeconds();
  event.eta_seconds = mean_update * (updates - updates_done);
  sink_->Emit(event);
}

void Trainer::EmitInitialEval() {
  phase_ = "initial_eval";
  const std::vector<SliceLoss> losses = Evaluate();
  sink_->Emit(EvalEvent{0, /*initial=*/true, spec_.init_from.path, losses, MeanLoss(losses)});
}

Status Trainer::EvaluateAndCheckpoint(const TrainerOptions& options, TrainOutcome* outcome) {
  const TrainingSpec& t = spec_.training;
  const bool last = outcome->updates_done == t.updates;
  if (leader() && (last || outcome->updates_done % t.eval_interval == 0)) {
    phase_ = "eval";
    outcome->eval = Evaluate();
    sink_->Emit(EvalEvent{outcome->updates_done, /*initial=*/false, std::nullopt, outcome->eval,
                          MeanLoss(outcome->eval)});
  }
  // On every rank: a sharded plan gathers its optimizer state from all of them.
  if (last || outcome->updates_done % t.checkpoint_interval == 0) {
    phase_ = "checkpoint";
    return SaveCheckpoint(options, outcome->updates_done, last ? "final" : "interval");
  }
  return Status::Ok();
}

Result<FinishEvent::ModelFiles> Trainer::WriteModelFiles(const TrainerOptions& options,
                                                         TrainOutcome* outcome) {
  const std::filesystem::path dir = std::filesystem::path(options.model_path).parent_path();
  // An adapter job releases its adapter, then the model with the adapter merged into it.
  Result<std::vector<std::string>> adapter = WriteAdapterFiles(spec_, *model_, dir.string());
  if (!adapter.ok()) return adapter.status();
  if (spec_.finetune.method != FinetuneMethod::kFull) MergeAdapters(model_.get());
  TemporaryFile temporary(options.model_path);
  model_->SaveArtifact(temporary.path());
  if (Status s = temporary.Commit(); !s.ok()) return s;
  Result<std::string> hash = Sha256File(options.model_path);
  if (!hash.ok()) return hash.status();
  outcome->model_sha256 = *hash;
  // Beside it: the weights as safetensors and what they are, for code without trainerd.
  const std::string weights = (dir / "model.safetensors").string();
  const std::string description = (dir / "model.json").string();
  if (Status s = WriteSafetensors(weights, model_->StateDict(),
                                  {{"format", "pt"}, {"trainerd_model", spec_.model.kind}});
      !s.ok()) {
    return s;
  }
  Result<std::string> weights_hash = Sha256File(weights);
  if (!weights_hash.ok()) return weights_hash.status();
  FinishEvent::ModelFiles written{weights, {*weights_hash}, description, {}};
  Result<std::vector<std::string>> companions = model_->WriteCompanionFiles(dir.string());
  if (!companions.ok()) return companions.status();
  companions->insert(companions->end(), adapter->begin(), adapter->end());
  for (const std::string& name : *companions) {
    const std::string path = (dir / name).string();
    Result<std::string> hash = Sha256File(path);
    if (!hash.ok()) return hash.status();
    written.companions.push_back({path, {*hash}});
  }
  const nlohmann::json files = {
      {"weights", "model.safetensors"},
      {model_->artifact_role(), std::filesystem::path(options.model_path).filename()},
      {"companions", *companions}};
  const nlohmann::json about =
      DescribeModel(spec_, *model_, job_identity_, corpus_.fingerprint(), files);
  if (Status s = WriteFileAtomically(description, about.dump(2) + "\n"); !s.ok()) return s;
  return written;
}

Status Trainer::Finish(const TrainerOptions& options, const RunTiming& timing,
                       TrainOutcome* outcome) {
  // Counted before the model files merge an adapter job's adapters (and unfreeze its base).
  const FlopsPerSample per_sample = TrainingFlopsPerSample(*model_, spec_.model);
  Result<FinishEvent::ModelFiles> model_files = WriteModelFiles(options, outcome);
  if (!model_files.ok()) return model_files.status();
  const TrainingSpec& t = spec_.training;
  const double elapsed = timing.ElapsedSeconds();
  // No update ran in this process: no loss or throughput to report (none, never 0).
  const bool trained = outcome->updates_done > timing.first;
  const auto measured = [trained](double value) {
    return trained ? std::optional<double>(value) : std::nullopt;
  };
  // Too short a run to exclude warm-up: fall back to the whole elapsed time.
  const bool timed = timing.measured_updates > 0;
  const double throughput_seconds = timed ? timing.measured_seconds : elapsed;
  const int throughput_updates = timed ? timing.measured_updates : t.updates - timing.first;
  const double samples_per_second =
      throughput_updates * static_cast<double>(t.effective_batch) / throughput_seconds;
  DeviceMemory& memory = MemoryOf(device_);
  // The training's peaks, read before the FLOP/s probe allocates its matrices.
  const std::int64_t peak_bytes = memory.peak_bytes();
  const std::int64_t reserved_peak_bytes = memory.peak_reserved_bytes();
  // The peak is one rank's (this process's device and threads): MFU compares it with a
  // rank's share of the job's FLOP/s, which near or above a cached peak has it probed again.
  const int world_size = this->world_size();
  const std::optional<double> achieved =
      per_sample.value ? std::optional<double>(samples_per_second * *per_sample.value / world_size)
                       : std::nullopt;
  double peak_flops = 0;
  {
    ScopedMemoryLimit lifted(memory, 0);  // the probe's matrices are not the job's memory
    peak_flops =
        PeakFlops(spec_.plan.precision, device_, options.peak_flops_cache, achieved.value_or(0));
  }
  const ThroughputAssessment flops = AssessThroughput(achieved, peak_flops, per_sample.method);
  FinishEvent finish;
  finish.updates = outcome->updates_done;
  finish.updates_trained = outcome->updates_done - timing.first;
  finish.final_train_loss = measured(outcome->final_train_loss);
  finish.eval_slices = outcome->eval;
  finish.eval_mean_loss = MeanLoss(outcome->eval);
  finish.model_path = options.model_path;
  finish.model_sha256 = {outcome->model_sha256};
  finish.model_files = *model_files;
  finish.elapsed_seconds = elapsed;
  finish.samples_per_second = measured(samples_per_second);
  finish.world_size = world_size;
  finish.samples_per_second_per_rank = measured(samples_per_second / world_size);
  finish.tokens_per_second = measured(samples_per_second * corpus_.window());
  finish.throughput_method =
      "wall clock per optimizer update after device synchronization, evaluation and "
      "checkpoints excluded, first " +
      std::to_string(kWarmupUpdates) + " updates excluded as warm-up";
  finish.peak_bytes = peak_bytes;
  finish.reserved_peak_bytes = reserved_peak_bytes;
  finish.memory_method = memory.method();
  finish.model_flops_per_sample = per_sample.value;
  finish.flops_method = per_sample.method;
  if (per_sample.value) finish.model_flops_per_second = flops.achieved_flops * world_size;
  finish.peak_flops_per_second = flops.peak_flops;
  if (const std::optional<IsaPeak> isa = IsaRoof(spec_.plan.precision, device_)) {
    finish.isa_peak_flops_per_second = isa->flops_per_second;
    finish.isa_peak_method = isa->how;
    if (std::optional<std::string> below = PeakBelowTheIsaRoof(flops.peak_flops, *isa)) {
      sink_->Emit(WarningEvent{"peak_below_isa", *below});
    }
  }
  if (trained && flops.valid) finish.mfu = flops.mfu;
  finish.measurement_valid = trained && flops.valid;
  finish.measurement_note =
      trained ? flops.note : "resumed at the job's last update: nothing trained";
  finish.hardware = HardwareFingerprint();
  sink_->Emit(finish);
  return Status::Ok();
}

Result<TrainOutcome> Trainer::Run(const TrainerOptions& options) {
  TrainOutcome outcome;
  const OutOfMemoryWatch out_of_memory;
  phase_ = "resume";
  try {
    Result<ResumePoint> resumed = ResumeFrom(options);
    if (!resumed.ok()) return resumed.status();
    outcome.updates_done = resumed->updates_done;
    if (Status s = CheckRanksAgree(outcome.updates_done); !s.ok()) return s;
    if (std::optional<std::string> refusal = state_->HostBudgetRefusal(spec_.memory, group_)) {
      outcome.kind = TrainOutcome::Kind::kOutOfMemory;
      outcome.message = *refusal;
      outcome.details =
          FailureDetails{outcome.updates_done + 1, spec_.plan, std::nullopt, LedgerSnapshot()};
      return outcome;
    }
    model_->train();
    EmitStart(*resumed);
    if (!spec_.init_from.path.empty() && outcome.updates_done == 0 && leader()) {
      EmitInitialEval();
    }

    DeviceMemory& memory = MemoryOf(device_);
    memory.ResetPeak();
    LeakDetector leaks(options.leak_detection);
    torch::Tensor retained_by_test_hook;
    RunTiming timing(outcome.updates_done);
    int skipped_in_a_row = 0;
    for (int update = outcome.updates_done; update < spec_.training.updates; ++update) {
      if (StopRequested(options)) {
        if (Status s = SaveCheckpoint(options, outcome.updates_done, "signal"); !s.ok()) return s;
        outcome.kind = TrainOutcome::Kind::kInterrupted;
        return outcome;
      }
      // Live bytes at the same point of every update: growth means something keeps a graph.
      if (leaks.Observe(memory.live_bytes())) {
        outcome.kind = TrainOutcome::Kind::kLeak;
        outcome.message = "live memory grew by " + FormatBytes(leaks.growth_bytes()) +
                          " over the last updates and keeps growing: a tensor that holds a "
                          "graph is being retained across updates";
        outcome.details =
            FailureDetails{update + 1, std::nullopt, leaks.growth_bytes(), LedgerSnapshot()};
        return outcome;
      }
      phase_ = "update";
      const DeviceTimer update_timer(device_);
      const UpdateStats stats = TrainUpdate(update);
      const double update_seconds = update_timer.Seconds();
      if (!std::isfinite(stats.loss) || stats.nonfinite_gradient) {
        outcome.kind = TrainOutcome::Kind::kDiverged;
        outcome.message =
            (stats.nonfinite_gradient
                 ? "the gradient norm is " + std::to_string(stats.grad_norm) +
                       " with a finite loss (" + std::to_string(stats.loss) + ")"
                 : "training loss is " + std::to_string(stats.loss)) +
            " at update " + std::to_string(update + 1) +
            "; no step was taken and nothing was written. Lower optimizer.lr or check the data";
        return outcome;
      }
      skipped_in_a_row = stats.skipped ? skipped_in_a_row + 1 : 0;
      if (std::optional<std::string> why =
              SkippedTooMuch(skipped_in_a_row, update, timing.first, spec_.training.updates)) {
        outcome.kind = TrainOutcome::Kind::kDiverged;
        outcome.message = *why;
        return outcome;
      }
      if (options.test_only_retain_loss_graph) {
        const Batch batch = Microbatches(update).front();
        const torch::Tensor loss = model_->ForwardLoss(batch).sum;
        retained_by_test_hook =
            retained_by_test_hook.defined() ? retained_by_test_hook + loss : loss;
      }
      outcome.updates_done = update + 1;
      outcome.final_train_loss = stats.loss;
      timing.Count(update, update_seconds);
      EmitUpdate(stats, outcome.updates_done, update_seconds, timing);
      if (Status s = EvaluateAndCheckpoint(options, &outcome); !s.ok()) return s;
    }
    if (!leader()) return outcome;  // rank 0 writes the model and reports
    // Resumed from the job's final checkpoint (its daemon died before recording the
    // finished run): nothing is left to train, but the finish event still reports the
    // model's real eval losses.
    phase_ = "finish";
    if (outcome.eval.empty()) outcome.eval = Evaluate();
    if (Status s = Finish(options, timing, &outcome); !s.ok()) return s;
  } catch (const std::exception& e) {
    if (out_of_memory.IsOutOfMemory(e)) {
      outcome.kind = TrainOutcome::Kind::kOutOfMemory;
      outcome.message = ModelErrorReason(e);
      outcome.phase = phase_;
      outcome.details =
          FailureDetails{outcome.updates_done + 1, spec_.plan, std::nullopt, LedgerSnapshot()};
      return outcome;
    }
    if (dynamic_cast<const c10::Error*>(&e) == nullptr) throw;
    return Status::Internal(std::string("LibTorch: ") + ModelErrorReason(e));
  }
  return outcome;
}

}  // namespace trainerd
