// The models trainerd trains, behind one interface the training loop, the ledger, the planner
// and the parity check use: they never ask which kind a model is. A model is a sequence of
// "blocks" (GPT decoder blocks, MLP hidden layers) that a plan may address individually. Each
// kind registers how its model is built (model_registry.h). Not thread-safe (torch modules).
#pragma once

#include <torch/csrc/autograd/grad_mode.h>
#include <torch/nn/module.h>
#include <torch/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "trainerd/common/status.h"
#include "trainerd/trainer/data/dataset.h"
#include "trainerd/trainer/semantics/activation_checkpoint.h"
#include "trainerd/trainer/semantics/loss.h"
#include "trainerd/trainer/semantics/output_chunks.h"
#include "trainerd/trainer/semantics/training_fault.h"
#include "trainerd/trainer/spec/job_spec.h"

namespace trainerd {

// Training FLOPs (forward + backward) per sample, and how they were obtained; or none and why
// (MFU is then null, never a guess).
struct FlopsPerSample {
  std::optional<double> value;
  std::string method;
};

class TrainableModel : public torch::nn::Module {
 public:
  // Logits: [B, T, vocab] for next-token models, [B, classes] for classifiers; for rows,
  // whatever model.loss compares with the targets.
  virtual torch::Tensor forward(const torch::Tensor& inputs) = 0;
  // The loss of a forward's outputs against `targets` as a sum and its term count (loss.h);
  // the training loop divides by the count of the whole effective batch.
  virtual LossTerms Loss(const torch::Tensor& outputs, const torch::Tensor& targets);
  // True when the model computes model.loss: module itself (overrides Loss for it).
  virtual bool has_own_loss() const { return false; }
  // The loss of a batch's inputs against its targets: Loss(forward(inputs), targets), with the
  // batch's document positions current (document_positions.h). A model with an output layer
  // (below) under the cross-entropy and an output chunk takes it in chunks (output_chunks.h),
  // never holding the [B, T, vocab] logits. `observe`, when set, sees the logits (REQUIRES: no
  // gradients recorded).
  LossTerms ForwardLoss(const Batch& batch, const OutputsObserver& observe = {});
  // A next-token model whose logits are one layer of its last hidden states, forward(x) ==
  // OutputLogits(Hidden(x)), names that layer's parameters here (a tied head's is the input
  // embedding). Empty, the default: no such layer, and ForwardLoss takes forward()'s outputs.
  virtual std::vector<torch::Tensor> output_layer_parameters() const { return {}; }
  // REQUIRES: output_layer_parameters() is not empty (the default throws).
  virtual torch::Tensor Hidden(const torch::Tensor& inputs);
  virtual torch::Tensor OutputLogits(const torch::Tensor& hidden);
  // Plan output_chunk: positions per chunk of the output layer's loss; 0 = all at once.
  void set_output_chunk(std::int64_t positions) { output_chunk_ = positions; }
  void set_loss(const LossSpec& loss) { loss_ = loss; }
  const LossSpec& loss() const { return loss_; }
  virtual SampleFormat sample_format() const = 0;
  virtual int num_blocks() const = 0;
  // True when a layer's output depends on the other samples of its microbatch (BatchNorm),
  // so that gradient accumulation is not equivalent to one large batch.
  virtual bool has_batch_statistics() const = 0;
  // The model's training FLOPs per sample from its own shape (a formula: the GPT's, 6 x
  // parameters); nullopt when it cannot say, and the job's model.flops_per_sample or a count
  // on a sample stands in (loop/throughput.h). Recomputation is not useful work.
  virtual std::optional<FlopsPerSample> TrainingFlops() const { return std::nullopt; }
  // Writes the trained model where the release will be: the module's parameters and buffers
  // (torch::save), or for a TorchScript model the scripted module with the trained weights.
  virtual void SaveArtifact(const std::string& path);
  // What SaveArtifact writes, as model.json's files name it: "state" (parameters and buffers,
  // torch::save) or "module" (a module the team's code loads as it is).
  virtual const char* artifact_role() const { return "state"; }
  // The trained tensors by the names the team's code knows them by (parameters and
  // buffers, dotted as in a PyTorch state_dict): what model.safetensors holds.
  virtual std::vector<std::pair<std::string, torch::Tensor>> StateDict() const;
  // Writes into `dir` the files the team's code needs beside model.safetensors to load it (a
  // Hugging Face model's config.json, generation and tokenizer files) and returns their
  // names; the release carries them. None by default.
  virtual Result<std::vector<std::string>> WriteCompanionFiles(const std::string& /*dir*/) const {
    return std::vector<std::string>{};
  }

  // Why a plan can checkpoint no part of this model, for the memory ledger; "" when it can
  // (or has nothing to say).
  virtual std::string blocks_note() const { return ""; }
  // Puts the model's dropout whose masks the trainer does not own (they come from the default
  // generator, so they depend on the microbatch split) out of action for good, for the parity
  // check; returns how many modules it switched off.
  virtual int SwitchOffOwnDropout() { return 0; }

  // Blocks whose activations are recomputed in backward instead of kept (plan
  // checkpoint_blocks). REQUIRES: every index < num_blocks().
  void set_checkpointed_blocks(const std::vector<int>& blocks);
  const std::vector<int>& checkpointed_blocks() const { return checkpointed_; }
  // Plan offload_activations: the blocks not checkpointed keep what their forward saves for
  // the backward in host memory (semantics/activation_offload.h).
  void set_offload_activations(bool offload) { offload_activations_ = offload; }
  bool offload_activations() const { return offload_activations_; }

  // Called before (after = false) and after (after = true) each block's forward, and with
  // index num_blocks() around ForwardLoss's output layer and loss (of a model that has one);
  // the memory ledger measures per-block activations with it. Empty to remove.
  using BlockObserver = std::function<void(int index, bool after)>;
  void set_block_observer(BlockObserver observer) { block_observer_ = std::move(observer); }

  // TEST ONLY: kRecomputeFreshRng (checkpointed blocks recompute with fresh dropout masks),
  // kChunkDropsAToken and kOffloadRestoredStale act here; the others elsewhere.
  void set_test_only_fault(TrainingFault fault) { fault_ = fault; }

 protected:
  // Runs block `index` on `x` (and `more`, kept by value for a recompute), checkpointed when
  // the plan says so and gradients are being recorded.
  template <typename BlockHolder, typename... More>
  torch::Tensor RunBlock(int index, BlockHolder& block, const torch::Tensor& x,
                         const More&... more) {
    return RunBlock(
        index,
        [block, more...](const torch::Tensor& in) mutable { return block->forward(in, more...); },
        block->parameters(), block->buffers(), x);
  }
  // The same for a block given as a function of its input, the parameters it reads and the
  // buffers its forward updates.
  torch::Tensor RunBlock(int index, const BlockFunction& block,
                         const std::vector<torch::Tensor>& parameters,
                         const std::vector<torch::Tensor>& buffers, const torch::Tensor& x);

 private:
  bool IsCheckpointed(int index) const;
  // Loss() with autocast off: a plan's precision is its forward's, the loss is fp32.
  LossTerms LossOutsideAutocast(const torch::Tensor& outputs, const torch::Tensor& targets);
  std::vector<int> checkpointed_;
  LossSpec loss_;
  BlockObserver block_observer_;
  std::int64_t output_chunk_ = 0;
  bool offload_activations_ = false;
  TrainingFault fault_ = TrainingFault::kNone;
};

std::int64_t CountParameters(const torch::nn::Module& model);

// The parameters the optimizer updates: all of them, less those a job froze (adapters.h).
// Gradients, their sums over ranks, the clip, the step, the shards and the host's copy are
// theirs.
std::vector<torch::Tensor> TrainableParameters(const torch::nn::Module& model);
torch::OrderedDict<std::string, torch::Tensor> NamedTrainableParameters(
    const torch::nn::Module& model);
// Their elements.
std::int64_t CountTrainableParameters(const torch::nn::Module& model);

// The samples a model reading `inputs` is given.
SampleFormat SampleFormatOf(ModelInputs inputs);

}  // namespace trainerd
