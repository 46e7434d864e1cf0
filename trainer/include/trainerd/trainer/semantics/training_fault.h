// TEST ONLY: bugs the trainer can be told to commit, each a classic mistake of gradient
// accumulation, clipping, scheduling, weight decay, checkpointing or optimizer setup, so
// that tests show the parity check rejects every one (`trainer-run --parity --test-only-fault
// NAME`), and a gradient that is infinite while the loss is finite, to test what the loop, the
// ledger and the planner do with it. Nothing but trainer-run's --test-only-fault flag and tests
// sets one.
#pragma once

#include <optional>
#include <string_view>

namespace trainerd {

enum class TrainingFault {
  kNone,
  kLossPerMicrobatch,         // each microbatch's loss divided by its own valid-target count
  kStepPerMicrobatch,         // the optimizer steps after every microbatch
  kClipPerMicrobatch,         // the gradient is clipped after every microbatch's backward too
  kLrPerMicrobatch,           // the learning-rate schedule advances once per microbatch
  kRecomputeFreshRng,         // a checkpointed block's recompute draws dropout from whatever state
                              // the default generator is in, instead of its forward's masks
  kInfGradient,               // from the second update on, one gradient element is +inf after the
                              // backward passes while the loss stays finite
  kWeightDecayPerMicrobatch,  // AdamW's decoupled weight decay applied after every
                              // microbatch's backward too, not once per update
  kFrozenParameter,           // the smallest parameter tensor gets its gradient but is never
                              // stepped (as if left out of the optimizer)
  kOverflowFirstUpdate,       // the first update's gradient has a +inf element, as when an fp16
                              // loss scale is too large for the model at the start: the scaler
                              // skips that update and the optimizer state does not exist yet
  kStaleHostWeights,          // with the optimizer state on the host, the stepped weights are
                              // never copied back to the device
  kChunkDropsAToken,          // with the output layer in chunks, every chunk after the first
                              // leaves its first position's loss out (output_chunks.h)
  kStepBeforeClip,            // with the step inside the backward, each parameter stepped with
                              // its gradient as it comes, before the global norm's clip
  kOffloadRestoredStale,      // with the activations offloaded, a host copy is taken from a pool
                              // of freed ones of its shape without being written: the backward
                              // restores an earlier microbatch's tensor
};

// The command-line names: none, loss_per_microbatch, step_per_microbatch,
// clip_per_microbatch, lr_per_microbatch, recompute_fresh_rng, inf_gradient,
// weight_decay_per_microbatch, frozen_parameter, overflow_first_update, stale_host_weights,
// chunk_drops_a_token, step_before_clip.
std::optional<TrainingFault> ParseTrainingFault(std::string_view name);
std::string_view ToString(TrainingFault fault);

}  // namespace trainerd
