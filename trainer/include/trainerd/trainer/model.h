// The models trainerd trains, behind one interface the training loop uses. A model is a
// sequence of "blocks" (GPT decoder blocks, MLP hidden layers) that a plan may address
// individually. Not thread-safe (torch modules).
#pragma once

#include <torch/nn/module.h>
#include <torch/types.h>

#include <memory>

#include "trainerd/trainer/job_spec.h"
#include "trainerd/trainer/text_corpus.h"

namespace trainerd {

class TrainableModel : public torch::nn::Module {
 public:
  // Logits: [B, T, vocab] for next-token models, [B, classes] for classifiers.
  virtual torch::Tensor forward(const torch::Tensor& inputs) = 0;
  virtual SampleFormat sample_format() const = 0;
  virtual int num_blocks() const = 0;
  // True when a layer's output depends on the other samples of its microbatch (BatchNorm),
  // so that gradient accumulation is not equivalent to one large batch.
  virtual bool has_batch_statistics() const = 0;
};

// Builds the model of `spec`; `num_classes` is the classifier's output size (slices).
std::shared_ptr<TrainableModel> BuildModel(const ModelSpec& spec, int num_classes);

std::int64_t CountParameters(const torch::nn::Module& model);

// Sum of the cross-entropy over the valid targets (target -1 is masked) and how many
// targets were valid: the caller divides by the valid count of the whole effective batch.
struct LossTerms {
  torch::Tensor sum;
  std::int64_t count = 0;
};
LossTerms CrossEntropySum(const torch::Tensor& logits, const torch::Tensor& targets);

}  // namespace trainerd
