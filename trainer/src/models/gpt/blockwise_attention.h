// Causal attention softmax(q k^T / sqrt(D) + causal mask) v, with dropout on the attention
// weights, for q, k, v [B, H, T, D] on the CPU, as one autograd function that keeps for
// backward only q, k, v, the output and each query row's log-sum-exp: never a [B, H, T, T]
// tensor. Query rows are taken kAttentionRowsPerBlock at a time, against the keys from the
// first any of them sees (visible_keys.h: a sliding window's, a packed document's) up to the
// block's last row (the key blocks above the diagonal and before that first are all masked and
// are skipped);
// backward recomputes each block's weights from the saved log-sum-exp. The dropout mask is
// the counter-based one (dropout_counters.h) over the weights [B, H, T, T] in memory order,
// the mask ExplicitCausalAttention with a regenerated SampleDropout draws, so the two agree to
// rounding. Float, bfloat16 and half tensors; the softmax is computed in float. Heads are
// split over the runtime's threads. Float q, k and v are read where they lie (views such as
// the heads of one qkv projection), one BLAS call per head and block of queries
// (device/batched_product.h); bfloat16 and half are copied contiguous and multiplied by bmm.
#pragma once

#include <torch/types.h>

#include <optional>

#include "trainerd/trainer/semantics/dropout_counters.h"

namespace trainerd {

inline constexpr std::int64_t kAttentionRowsPerBlock = 64;

// Whether BlockwiseCausalAttention takes tensors like `q`.
bool BlockwiseAttentionSupports(const torch::Tensor& q);

// Returns [B, T, H * D]: the heads merged, the layout the output projection takes. `dropout`:
// the mask's counters, none for no dropout. `first`: each query's first visible key
// (visible_keys.h), undefined for every key before it. `rows_per_block`: the queries taken at
// a time (bench/attention_bench measures others).
torch::Tensor BlockwiseCausalAttention(const torch::Tensor& q, const torch::Tensor& k,
                                       const torch::Tensor& v,
                                       const std::optional<DropoutCounters>& dropout,
                                       const torch::Tensor& first = {},
                                       std::int64_t rows_per_block = kAttentionRowsPerBlock);

}  // namespace trainerd
