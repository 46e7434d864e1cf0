// Which keys each query of causal attention sees, beyond causality: query i of sample b sees
// keys [first[b][i], i]. A sliding window of w positions (Mistral's, Qwen2's) starts at
// max(0, i - w + 1), as transformers' sliding_window_overlay (kv_idx > q_idx - w) has it; a
// packed document (semantics/document_positions.h) at its own first id, i - position[b][i],
// as transformers' packed_sequence_mask has it; both, at the later of the two.
// Every attention kernel takes the same `first` (gpt.h: CausalAttention), so that they agree.
#pragma once

#include <torch/types.h>

#include <cstdint>

namespace trainerd {

// `first` [1, T] int64 on the CPU of a sliding window of `window` positions over `t` queries;
// undefined when the window covers them all (window <= 0 or window >= t): plain causal.
torch::Tensor SlidingWindowFirstKeys(std::int64_t t, std::int64_t window);

// `first` [B or 1, T] of the queries of `positions` (documents' positions, [B, T] on the CPU, or
// undefined: one document) under a sliding window of `window` (<= 0: none); undefined when
// neither limits them.
torch::Tensor FirstVisibleKeys(const torch::Tensor& positions, std::int64_t t, std::int64_t window);

// The keys each query may attend to, as the explicit and fused kernels take them: a bool
// [B or 1, 1, T, T], true where key j is in [first[b][i], i]. REQUIRES: first is defined.
torch::Tensor VisibleKeyMask(const torch::Tensor& first, torch::Device device);

}  // namespace trainerd
