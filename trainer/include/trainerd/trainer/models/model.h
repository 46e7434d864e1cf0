// The models trainerd trains, behind one interface the training loop uses. A model is a
// sequence of "blocks" (GPT decoder blocks, MLP hidden layers) that a plan may address
// individually. Not thread-safe (torch modules).
#pragma once

#include <torch/csrc/autograd/grad_mode.h>
#include <torch/nn/module.h>
#include <torch/types.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "trainerd/common/status.h"
#include "trainerd/trainer/data/dataset.h"
#include "trainerd/trainer/semantics/activation_checkpoint.h"
#include "trainerd/trainer/semantics/loss.h"
#include "trainerd/trainer/spec/job_spec.h"

namespace trainerd {

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
  void set_loss(const LossSpec& loss) { loss_ = loss; }
  const LossSpec& loss() const { return loss_; }
  virtual SampleFormat sample_format() const = 0;
  virtual int num_blocks() const = 0;
  // True when a layer's output depends on the other samples of its microbatch (BatchNorm),
  // so that gradient accumulation is not equivalent to one large batch.
  virtual bool has_batch_statistics() const = 0;
  // Writes the trained model where the release will be: the module's parameters and buffers
  // (torch::save), or for a TorchScript model the scripted module with the trained weights.
  virtual void SaveArtifact(const std::string& path);
  // The trained tensors by the names the team's code knows them by (parameters and
  // buffers, dotted as in a PyTorch state_dict): what model.safetensors holds.
  virtual std::vector<std::pair<std::string, torch::Tensor>> StateDict() const;

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

  // Called before (after = false) and after (after = true) each block's forward; the memory
  // ledger measures per-block activations with it. Empty to remove.
  using BlockObserver = std::function<void(int index, bool after)>;
  void set_block_observer(BlockObserver observer) { block_observer_ = std::move(observer); }

  // TEST ONLY (TrainingFault::kRecomputeFreshRng): checkpointed blocks recompute with fresh
  // dropout masks.
  void set_test_only_fresh_recompute(bool fresh) { fresh_recompute_ = fresh; }

 protected:
  // Runs block `index`, checkpointed when the plan says so and gradients are being recorded.
  template <typename BlockHolder>
  torch::Tensor RunBlock(int index, BlockHolder& block, const torch::Tensor& x) {
    return RunBlock(
        index, [block](const torch::Tensor& in) mutable { return block->forward(in); },
        block->parameters(), block->buffers(), x);
  }
  // The same for a block given as a function of its input, the parameters it reads and the
  // buffers its forward updates.
  torch::Tensor RunBlock(int index, const BlockFunction& block,
                         const std::vector<torch::Tensor>& parameters,
                         const std::vector<torch::Tensor>& buffers, const torch::Tensor& x);

 private:
  bool IsCheckpointed(int index) const;
  std::vector<int> checkpointed_;
  LossSpec loss_;
  BlockObserver block_observer_;
  bool fresh_recompute_ = false;
};

// Builds the model of `spec` with its loss; `num_classes` is the classifier's output size
// (slices). The team's own model is loaded from its file or plugin library (ResolveOwnModel,
// own_model.h, has checked it).
std::shared_ptr<TrainableModel> BuildModel(const ModelSpec& spec, int num_classes);

std::int64_t CountParameters(const torch::nn::Module& model);

// What a model of `spec` reads (the team's own model: per model.inputs).
SampleFormat FormatRead(const ModelSpec& spec);
SampleFormat FormatOf(ModelInputs inputs);

// Whether the model of `spec` can read `data`: the data gives what it reads (a byte
// histogram needs text, rows need tensors), its vocabulary covers every token id
// (model.vocab_size, or a TorchScript model's logits), its classes every slice or every
// integer target (cross_entropy on rows). InvalidArgument naming the job
// file (`origin`), the key, the value and what the data needs.
Status CheckModelFitsData(const ModelSpec& spec, const std::string& origin, const Dataset& data);

}  // namespace trainerd
