// The team's own model: a module exported from Python with torch.jit.script (or trace),
// loaded with torch::jit::load and trained like the built-in models. Its parameters and
// buffers are the TorchScript module's own tensors, registered with this module, so the
// optimizer, checkpoints, device moves and the ledger see them, and the module saved after
// training carries the trained weights.
//
// Block protocol (docs/bring-your-own-model.md): a ModuleList attribute (`blocks`) and
// exported methods `embed` and `head` run as embed -> each block -> head, each block
// checkpointed when the plan says so. Without it the module's `forward` runs as one opaque
// block that no plan can checkpoint (num_blocks() is 0).
//
// Dropout inside the module draws from LibTorch's default generator, so its masks depend on
// how a batch is split: the parity check switches it off (SwitchOffOwnDropout) and says so.
// Not thread-safe.
#pragma once

#include <torch/script.h>

#include <memory>
#include <string>
#include <vector>

#include "models/torchscript/torchscript_spec.h"
#include "trainerd/trainer/models/model.h"

namespace trainerd {

// The method a module exports for model.loss: module.
inline constexpr char kLossMethod[] = "loss";

class TorchScriptModel : public TrainableModel {
 public:
  // Loads keys.path (throws c10::Error when it is no TorchScript module); the module reads
  // `inputs`. The torchscript kind's factory says why in the job's terms.
  TorchScriptModel(const TorchScriptKeys& keys, ModelInputs inputs);

  torch::Tensor forward(const torch::Tensor& inputs) override;
  SampleFormat sample_format() const override;
  // model.loss: module calls the module's `loss(outputs, targets) -> (sum, count)`.
  LossTerms Loss(const torch::Tensor& outputs, const torch::Tensor& targets) override;
  int num_blocks() const override { return static_cast<int>(blocks_.size()); }
  bool has_batch_statistics() const override;
  void train(bool on = true) override;
  void SaveArtifact(const std::string& path) override;
  const char* artifact_role() const override { return "module"; }
  // The module's own names ("blocks.0.fc.weight"), which its load_state_dict takes.
  std::vector<std::pair<std::string, torch::Tensor>> StateDict() const override;

  bool has_block_protocol() const { return missing_protocol_.empty(); }
  // What the module lacks of the block protocol ("" when it has it), e.g. "an exported
  // method 'embed'".
  const std::string& missing_protocol() const { return missing_protocol_; }
  bool has_own_loss() const override;  // an exported `loss` method
  // Without the block protocol: that the module runs as one opaque block, and what it lacks.
  std::string blocks_note() const override;
  // Puts the module's own Dropout submodules in eval mode for good; returns how many.
  int SwitchOffOwnDropout() override;

 private:
  TorchScriptKeys keys_;
  ModelInputs inputs_;
  torch::jit::Module module_;
  std::string missing_protocol_;
  std::vector<torch::jit::Module> blocks_;
  std::vector<std::vector<torch::Tensor>> block_parameters_, block_buffers_;
  std::vector<torch::jit::Module> own_dropout_;  // switched off: kept in eval mode
};

}  // namespace trainerd
