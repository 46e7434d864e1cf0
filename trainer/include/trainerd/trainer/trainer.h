// The training loop: one job spec, trained update by update with its plan, emitting events
// to an EventSink. Per optimizer update: zero gradients once; for each microbatch, forward,
// loss divided by the valid-target count of the whole effective batch, backward; then once:
// unscale (fp16), clip the global gradient norm, AdamW step with the scheduled learning
// rate (see gradient_accumulation.h).
// Not thread-safe; owns its model and optimizer. Torch exceptions are turned into Status.
#pragma once

#include <torch/optim/adamw.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "trainerd/common/status.h"
#include "trainerd/trainer/event_sink.h"
#include "trainerd/trainer/gradient_accumulation.h"
#include "trainerd/trainer/job_spec.h"
#include "trainerd/trainer/loss_scaler.h"
#include "trainerd/trainer/model.h"
#include "trainerd/trainer/text_corpus.h"

namespace trainerd {

struct TrainerOptions {
  std::string checkpoint_path;  // training checkpoint, written every checkpoint_interval
  std::string model_path;       // final model artifact (parameters only)
  bool resume = false;          // continue from checkpoint_path
  // Polled between updates; when set, the loop writes a checkpoint and returns kInterrupted.
  const std::atomic<bool>* stop_requested = nullptr;
};

struct SliceLoss {
  std::string name;
  double loss = 0;
};

struct TrainOutcome {
  enum class Kind {
    kFinished,     // all updates done, model artifact written
    kInterrupted,  // stop requested; checkpoint written
    kDiverged,     // non-finite loss; no step taken, nothing written
  };
  Kind kind = Kind::kFinished;
  std::string message;  // why, when not finished
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
  bool skipped = false;  // fp16 overflow: no optimizer step
};

class Trainer {
 public:
  // `corpus` and `sink` must outlive the trainer. Seeds torch from the spec and builds the
  // model with the plan's checkpointed blocks, so two trainers of one spec start from
  // identical parameters whatever their plans.
  Trainer(const JobSpec& spec, const TextCorpus& corpus, EventSink* sink);

  // Trains until the spec's update count, a stop request or a non-finite loss. Errors:
  // checkpoint problems (NotFound, Corruption, FailedPrecondition), IO and LibTorch errors.
  Result<TrainOutcome> Run(const TrainerOptions& options);

  // Optimizer update `update` (0-based): zero grads, accumulate over the plan's
  // microbatches, unscale/clip/step, learning rate from the schedule. A non-finite loss is
  // returned without stepping. Exposed for the parity check and tests.
  UpdateStats TrainUpdate(int update);

  TrainableModel& model() { return *model_; }
  const DynamicLossScaler* loss_scaler() const { return scaler_ ? &*scaler_ : nullptr; }
  // Held-out loss per slice with the current parameters (eval mode, no grad).
  std::vector<SliceLoss> Evaluate();

 private:
  nlohmann::json StartEvent(int resumed_from) const;
  PrecisionContext precision_context();

  JobSpec spec_;
  const TextCorpus& corpus_;
  EventSink* sink_;
  torch::Device device_;
  std::shared_ptr<TrainableModel> model_;
  std::unique_ptr<torch::optim::AdamW> optimizer_;
  std::optional<DynamicLossScaler> scaler_;  // fp16 only
  std::string job_identity_;
};

// Sets LibTorch's intra-op threads from the spec (0 = all cores) and returns the count used.
int ConfigureThreads(const RuntimeSpec& runtime);

}  // namespace trainerd
