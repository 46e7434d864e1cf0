// What every Hugging Face causal-LM architecture shares (model.kind: hf): the config it was
// read with, the folder it came from, next-token samples, and the release as a Hugging Face
// folder (WriteCompanionFiles). The architectures: llama_family.h, gpt2.h.
#pragma once

#include <torch/nn/modules/linear.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models/hf/hf_config_spec.h"
#include "trainerd/trainer/models/model.h"

namespace trainerd {

class HfModel : public TrainableModel {
 public:
  // `block_size`: the job's window, for TrainingFlops; `folder`: where the weights and the
  // files the release carries are read from.
  HfModel(const HfDecoderConfig& config, int block_size, std::string folder);

  SampleFormat sample_format() const override { return SampleFormat::kNextToken; }
  bool has_batch_statistics() const override { return false; }
  // [B, T] -> [B, T, vocab]: the head on the architecture's Hidden (after its final norm).
  torch::Tensor forward(const torch::Tensor& tokens) override;
  torch::Tensor OutputLogits(const torch::Tensor& hidden) override;
  std::vector<torch::Tensor> output_layer_parameters() const override;
  const HfDecoderConfig& config() const { return config_; }
  // Tensors a folder may hold that are no weights here (a tied head's copy of the embedding,
  // GPT-2's attention mask buffers).
  virtual std::vector<std::string> IgnoredWeights() const;
  // A prefix of the weights' names that a checkpoint may leave out (GPT-2's "transformer.").
  virtual std::string OptionalPrefix() const { return ""; }
  // Reads config.json and the folder's generation_config.json and tokenizer files now, when
  // the night starts: what WriteCompanionFiles writes hours later is what was trained on,
  // whatever changed in the folder since. Each a regular file of at most 256 MiB.
  Status KeepCarriedFiles();
  // config.json as kept, its dtype float32 (model.safetensors is written so), and the
  // generation_config.json and tokenizer files kept with it: with model.safetensors, a folder
  // transformers' from_pretrained loads. REQUIRES: KeepCarriedFiles() succeeded.
  Result<std::vector<std::string>> WriteCompanionFiles(const std::string& dir) const override;

 protected:
  // The training FLOPs of a sample: per token, 6 x the parameters that multiply (all but the
  // input embedding, which counts again as the head when tied, and `not_multiplying` more,
  // named `what`) + 12 x layers x T x heads x head_dim (attention scores); times T.
  FlopsPerSample Flops(double not_multiplying, const std::string& what) const;
  // The architecture's head, null when it is tied to the input embedding, whose weight
  // input_embedding() is.
  virtual torch::nn::Linear lm_head() const = 0;
  virtual torch::Tensor input_embedding() const = 0;
  std::int64_t block_size() const { return block_size_; }

 private:
  HfDecoderConfig config_;
  std::int64_t block_size_ = 0;
  std::string folder_;
  nlohmann::json config_json_;                                // config.json as the night started
  std::vector<std::pair<std::string, std::string>> carried_;  // other files: name, bytes
};

}  // namespace trainerd
