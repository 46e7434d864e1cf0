#include "trainerd/trainer/semantics/document_positions.h"

#include <torch/torch.h>

#include <utility>

namespace trainerd {
namespace {

thread_local torch::Tensor current_positions;

}  // namespace

DocumentPositionsScope::DocumentPositionsScope(torch::Tensor positions)
    : previous_(std::exchange(current_positions, std::move(positions))) {}

DocumentPositionsScope::~DocumentPositionsScope() { current_positions = std::move(previous_); }

const torch::Tensor& DocumentPositionsScope::Current() { return current_positions; }

torch::Tensor InputPositions(const torch::Tensor& tokens) {
  const torch::Tensor& positions = current_positions;
  if (!positions.defined()) {
    return torch::arange(tokens.size(1), tokens.options().dtype(torch::kLong)).unsqueeze(0);
  }
  TORCH_CHECK(positions.sizes() == tokens.sizes(), "document positions of shape ",
              positions.sizes(), " for tokens of shape ", tokens.sizes());
  return positions.to(tokens.device());
}

}  // namespace trainerd
