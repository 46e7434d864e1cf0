// The training loop: one job spec, trained update by update with its plan, emitting events
// to an EventSink. Per optimizer update: zero gradients once; for each microbatch, forward,
// loss divided by the valid-target count of the whole effective batch, backward; then once:
// unscale (fp16), clip the global gradient norm, AdamW step with the scheduled learning
// rate (see gradient_accumulation.h).
// In a data-parallel job (data_parallel.h) every rank runs a Trainer on its share of each
// update; gradients are summed over the ranks after the last microbatch. Rank 0 alone
// evaluates, writes checkpoints and the model, and emits events; every rank resumes from the
// same checkpoint and all stop at the same update when any is asked to stop.
// Not thread-safe; owns its model and optimizer. Torch exceptions are turned into Status.
#pragma once

#include <torch/optim/adamw.h>

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "trainerd/common/status.h"
#include "trainerd/trainer/data/dataset.h"
#include "trainerd/trainer/distributed/data_parallel.h"
#include "trainerd/trainer/evaluation/simple_baseline.h"
#include "trainerd/trainer/loop/event_sink.h"
#include "trainerd/trainer/loop/gradient_accumulation.h"
#include "trainerd/trainer/loop/leak_detector.h"
#include "trainerd/trainer/loop/model_state.h"
#include "trainerd/trainer/loop/training_checkpoint.h"
#include "trainerd/trainer/models/model.h"
#include "trainerd/trainer/semantics/loss_scaler.h"
#include "trainerd/trainer/spec/job_spec.h"

namespace trainerd {

// Whether a run continues from an existing training checkpoint.
enum class Resume {
  kNo,            // start from update 0
  kRequired,      // continue from checkpoint_path; missing, corrupt or another job's: error
  kIfCompatible,  // continue when checkpoint_path holds this job's checkpoint, else start
                  // from update 0 with a `warning` event (kind checkpoint_ignored)
};

struct TrainerOptions {
  std::string checkpoint_path;  // training checkpoint, written every checkpoint_interval
  std::string model_path;       // final model artifact; model.safetensors and model.json beside it
  Resume resume = Resume::kNo;
  // Polled between updates; when set, the loop writes a checkpoint and returns kInterrupted.
  const std::atomic<bool>* stop_requested = nullptr;
  // Machine peak FLOP/s cache for MFU (throughput.h); empty: measure without caching.
  std::string peak_flops_cache;
  LeakDetectorOptions leak_detection;
  // TEST ONLY: fault injection for the leak detector. Each update also adds the loss of an
  // extra forward, never backpropagated, to a running total kept across updates: the classic
  // `total += loss` that keeps every forward's graph and activations alive.
  bool test_only_retain_loss_graph = false;
};

struct TrainOutcome {
  enum class Kind {
    kFinished,     // all updates done, model artifact written
    kInterrupted,  // stop requested; checkpoint written
    kDiverged,     // non-finite loss; no step taken, nothing written
    kOutOfMemory,  // an allocation exceeded the device limit; `details` has plan and ledger
    kLeak,         // live bytes kept growing across updates; `details` has the growth
  };
  Kind kind = Kind::kFinished;
  std::string message;                    // why, when not finished
  std::optional<FailureDetails> details;  // for kOutOfMemory and kLeak
  std::string phase;  // kOutOfMemory: what ran out (ErrorEvent::phase: update, eval, ...)
  int updates_done = 0;
  double final_train_loss = 0;
  std::vector<SliceLoss> eval;  // last evaluation; empty when interrupted before any
  std::string model_sha256;     // set when finished
};

// What one optimizer update did.
struct UpdateStats {
  double loss = 0;  // mean over the effective batch; non-finite means diverged
  double lr = 0;
  double grad_norm = 0;  // before clipping; inf when an fp16 overflow skipped the step
  // fp16 overflow (or ReplaySkip): no optimizer step. The update still counts (the next one
  // is update + 1) and the schedule still advances, as with PyTorch's GradScaler and a
  // scheduler stepped every iteration.
  bool skipped = false;
  // fp32/bf16: a NaN or inf gradient with a finite loss. No step: the caller stops.
  bool nonfinite_gradient = false;
};

class Trainer {
 public:
  // `corpus`, `sink` and `group` must outlive the trainer. Seeds torch from the spec and
  // builds the model with the plan's checkpointed blocks, so two trainers of one spec start
  // from identical parameters whatever their plans. `group`: this rank's data-parallel group,
  // nullptr for a one-process job; the plan is then per rank (RankJob).
  Trainer(const JobSpec& spec, const Dataset& corpus, EventSink* sink,
          DataParallelGroup* group = nullptr);

  // Trains until the spec's update count, a stop request or a non-finite loss. Errors:
  // checkpoint problems (NotFound, Corruption, FailedPrecondition), IO and LibTorch errors.
  Result<TrainOutcome> Run(const TrainerOptions& options);

  // Optimizer update `update` (0-based): zero grads, accumulate over the plan's
  // microbatches, unscale/clip/step, learning rate from the schedule. A non-finite loss is
  // returned without stepping. Exposed for the parity check, the ledger and tests;
  // `after_forward` observes each microbatch between its forward and backward.
  UpdateStats TrainUpdate(int update, const AfterForward& after_forward = {});
  // Update `update` computed as TrainUpdate computes it, up to the gradient and the norm the
  // before-clip observer sees, and then skipped as an fp16 overflow skips it: no step, the
  // schedule still advancing. The parity check replays the plan's skips with it on its sides
  // that have no loss scaler (fp32), so that every side's optimizer state stays comparable.
  UpdateStats ReplaySkip(int update);
  // Trains updates from `first` until one steps (an fp16 loss scaler skips those whose
  // gradients overflow, halving its scale each time), so that the optimizer state exists and
  // what follows is measured as training runs. The update after the one that stepped, or
  // nothing when 24 in a row were skipped (a run stops there as diverged).
  std::optional<int> TrainUntilStepped(int first);
  // Why a run has diverged when its fp16 loss scaler skipped `in_a_row` updates in a row
  // through `update` (0-based): 24 in a row, the scale fallen from 2^16 to 2^-8. Nothing below.
  std::optional<std::string> TooManySkipsInARow(int in_a_row, int update) const;

  // Observes every later update's unscaled gradient and norm before clipping (parity).
  void set_before_clip(BeforeClip observer) { before_clip_ = std::move(observer); }
  // TEST ONLY (training_fault.h): makes this trainer commit `fault`.
  void set_test_only_fault(TrainingFault fault);

  TrainableModel& model() { return *model_; }
  // Where the plan keeps the model's state, with the optimizer that steps it.
  ModelState& model_state() { return *state_; }
  const torch::Device& device() const { return device_; }
  // The plan's microbatches of this rank's share of update `update`, on the device.
  std::vector<Batch> Microbatches(int update) const;
  // Rank 0 of a data-parallel job, or the one process of a job without one: the rank that
  // evaluates, writes and reports.
  bool leader() const { return group_ == nullptr || group_->rank() == 0; }
  // Processes training the job: the group's size, 1 without one.
  int world_size() const { return group_ == nullptr ? 1 : group_->world_size(); }
  const DynamicLossScaler* loss_scaler() const { return scaler_ ? &*scaler_ : nullptr; }
  // Held-out loss per slice with the current parameters (eval mode, no grad), in microbatches of
  // the plan's size, with the simple baseline's loss, the distribution of the predictions and
  // each window's loss (evaluation/). The planner and the ledger measure this evaluation, as
  // training runs it.
  std::vector<SliceLoss> Evaluate();

 private:
  // Where Run() continues from per options.resume, and the warnings to emit after the start
  // event (a checkpoint ignored, or written on another device type).
  struct ResumePoint {
    int updates_done = 0;
    std::vector<WarningEvent> warnings;
  };
  Result<ResumePoint> ResumeFrom(const TrainerOptions& options);
  // The simple baseline's loss on held-out slice `slice` (its `targets`); none without one.
  std::optional<double> BaselineLoss(std::size_t slice, const torch::Tensor& targets,
                                     std::int64_t classes);
  // Fails unless every rank resumed from `updates_done` (a data-parallel job's ranks must).
  Status CheckRanksAgree(int updates_done);
  // Whether this update is where the run stops: a stop requested of any rank.
  bool StopRequested(const TrainerOptions& options);
  // Why the run has diverged when its fp16 loss scaler skipped `in_a_row` updates in a row
  // through `update` (0-based), in a run from `first` to `updates`: too many in a row
  // (TooManySkipsInARow), or every update of the run. Nothing otherwise.
  std::optional<std::string> SkippedTooMuch(int in_a_row, int update, int first, int updates) const;
  // "its loss scale is now 2^N", for the sentences of a run skipping too much.
  std::string LossScaleNow() const;
  // TrainUpdate, with the optimizer step taken or, for ReplaySkip, skipped.
  UpdateStats Update(int update, const AfterForward& after_forward, bool take_step);
  // The steps of Run(), in order.
  struct RunTiming;
  void EmitStart(const ResumePoint& resumed);
  // The weights of init_from evaluated before the first update: an eval event of update 0
  // marked initial, which the daemon's release gate compares the trained model with (the
  // release it replaces, on this night's held-out data).
  void EmitInitialEval();
  void EmitUpdate(const UpdateStats& stats, int updates_done, double update_seconds,
                  const RunTiming& timing);
  // Evaluation and checkpoint at their intervals and after the last update.
  Status EvaluateAndCheckpoint(const TrainerOptions& options, TrainOutcome* outcome);
  Status SaveCheckpoint(const TrainerOptions& options, int updates_done, const char* reason);
  // The model artifact (atomically, with its SHA-256), throughput and MFU, the finish event.
  // model.pt (its hash into *outcome), model.safetensors and model.json beside it: their
  // paths and the weights' hash, for the finish event.
  Result<FinishEvent::ModelFiles> WriteModelFiles(const TrainerOptions& options,
                                                  TrainOutcome* outcome);
  Status Finish(const TrainerOptions& options, const RunTiming& timing, TrainOutcome* outcome);
  StartEvent Start(int resumed_from) const;
  // Bytes by category at the moment of a failure: what is exact, and what was live.
  MemorySnapshot LedgerSnapshot() const;
  PrecisionContext precision_context();
  // How this trainer's updates step (ModelState::Step), with `before_clip` observing.
  StepOptions StepOptionsWith(const BeforeClip& before_clip);
  // TEST ONLY: what `fault_` does after a microbatch's backward, when another follows.
  void CommitMicrobatchFault(double lr);

  JobSpec spec_;
  const Dataset& corpus_;
  EventSink* sink_;
  DataParallelGroup* group_;
  RankShare share_;  // this rank's samples of every update
  torch::Device device_;
  std::shared_ptr<TrainableModel> model_;
  std::unique_ptr<ModelState> state_;
  std::optional<DynamicLossScaler> scaler_;  // fp16 only
  std::string job_identity_;
  // The simple baseline, fitted at the first evaluation (it needs the outputs' classes), and
  // its loss per slice index, scored once: the held-out samples never change.
  std::optional<SimpleBaseline> baseline_;
  bool baseline_fitted_ = false;
  std::map<std::size_t, double> baseline_losses_;
  BeforeClip before_clip_;
  TrainingFault fault_ = TrainingFault::kNone;
  const char* phase_ = "resume";  // what Run() is doing, for an out-of-memory's report
};

// Process-wide settings for training: LibTorch's intra-op threads from the spec (0 = the CPUs
// the process may use, UsableCpuCount(), shared by the `ranks_on_host` processes of a
// data-parallel job that run on this host; LibTorch alone would use one) and glibc malloc
// thresholds that keep activation-sized blocks (up to 32 MiB) on the heap instead of a fresh
// mmap per allocation, whose page faults more than doubled fp32 update time
// (docs/benchmarks.md). Returns the thread count.
int ConfigureRuntime(const RuntimeSpec& runtime, int ranks_on_host = 1);

}  // namespace trainerd
