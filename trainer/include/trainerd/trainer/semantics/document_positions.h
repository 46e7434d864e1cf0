// Packed documents (data.document_end): a window of token data may hold several documents, and
// none may see another or take its positions from it. The batch says where each input stands in
// its document (Batch::positions: 0 at each document's first id in the window, counting up);
// TrainableModel::ForwardLoss makes them current for its forward, and a model that keeps
// documents apart (model_kind.h: KeepsDocumentsApart) reads them at the start of its forward:
// its position embedding or rotary angles from InputPositions, and its attention's first
// visible keys from them (models/gpt/visible_keys.h), which its blocks capture, so that a
// checkpointed block's recompute in the backward sees what its forward saw. This is
// `transformers`' flattening collator with position_ids, and flash-attention's varlen path.
#pragma once

#include <torch/types.h>

namespace trainerd {

// Makes `positions` ([B, T] int64 on the CPU; undefined: none) current on this thread until
// destroyed; nests.
class DocumentPositionsScope {
 public:
  explicit DocumentPositionsScope(torch::Tensor positions);
  ~DocumentPositionsScope();
  DocumentPositionsScope(const DocumentPositionsScope&) = delete;
  DocumentPositionsScope& operator=(const DocumentPositionsScope&) = delete;

  // The current positions (on the CPU), or an undefined tensor: one document per window.
  static const torch::Tensor& Current();

 private:
  torch::Tensor previous_;
};

// The positions of `tokens` [B, T] on their device: the current ones ([B, T]; REQUIRES: their
// shape is the tokens'), or 0..T-1 as [1, T] when none are current.
torch::Tensor InputPositions(const torch::Tensor& tokens);

}  // namespace trainerd
