#include "models/gpt/blockwise_attention.h"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <torch/torch.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "trainerd/trainer/device/batched_product.h"
#include "trainerd/trainer/device/op_scopes.h"
#include "trainerd/trainer/semantics/sample_dropout.h"

namespace trainerd {
namespace {

// ---- Row kernels, on float rows, in GCC vector extensions ---------------------------------
// Eight lanes: one AVX register in the AVX2 clone, two SSE registers in the default one. The
// helpers are inlined into each clone, so the ABI of passing 32-byte vectors (GCC's -Wpsabi
// note, given for the whole file at its end) never applies.
#pragma GCC diagnostic ignored "-Wpsabi"

using Float8 = float __attribute__((vector_size(32)));
using Int8 = std::int32_t __attribute__((vector_size(32)));
constexpr std::int64_t kLanes = 8;

// Lanes [0, count) of `from` (count <= 8), the others `fill`.
__attribute__((always_inline)) inline Float8 Load(const float* from, std::int64_t count = kLanes,
                                                  float fill = 0) {
  Float8 v = {fill, fill, fill, fill, fill, fill, fill, fill};
  std::memcpy(&v, from, static_cast<std::size_t>(count) * sizeof(float));
  return v;
}

__attribute__((always_inline)) inline void StoreLanes(Float8 v, float* to,
                                                      std::int64_t count = kLanes) {
  std::memcpy(to, &v, static_cast<std::size_t>(count) * sizeof(float));
}

// Keep flags (0 or 1) as floats, lanes [0, count); 0 in the others.
__attribute__((always_inline)) inline Float8 KeepMask(const std::uint8_t* keep,
                                                      std::int64_t count = kLanes) {
  using Byte8 = std::uint8_t __attribute__((vector_size(8)));
  Byte8 bytes = {};
  std::memcpy(&bytes, keep, static_cast<std::size_t>(count));
  return __builtin_convertvector(bytes, Float8);
}

// 1 in lanes [0, count), 0 in the others.
__attribute__((always_inline)) inline Float8 FirstLanes(std::int64_t count) {
  const Float8 index = {0, 1, 2, 3, 4, 5, 6, 7};
  return index < static_cast<float>(count) ? 1.0F + Float8{} : Float8{};
}

// Cephes' expf: range reduction by ln 2 (in two parts) and a degree-6 polynomial, within 2 ulp
// on [-87, 88]; arguments below -87 give about 1e-38 rather than 0.
__attribute__((always_inline)) inline Float8 Exp(Float8 x) {
  x = x < -87.0F ? -87.0F + Float8{} : x;
  x = x > 88.0F ? 88.0F + Float8{} : x;
  const Float8 n = (x * 1.44269504088896341F + 12582912.0F) - 12582912.0F;  // round to nearest
  const Float8 r = x - n * 0.693359375F + n * 2.12194440e-4F;
  Float8 p = 1.9875691500e-4F * r + 1.3981999507e-3F;
  p = p * r + 8.3334519073e-3F;
  p = p * r + 4.1665795894e-2F;
  p = p * r + 1.6666665459e-1F;
  p = p * r + 5.0000001201e-1F;
  p = p * r * r + r + 1.0F;
  const Int8 bits = (__builtin_convertvector(n, Int8) + 127) << 23;
  return p * std::bit_cast<Float8>(bits);
}

// Calls body(j, count) on lanes [j, j + count) of a row of n: whole vectors (count the constant
// kLanes, so that loads and stores are single instructions), then the tail.
template <typename Body>
__attribute__((always_inline)) inline void ForLanes(std::int64_t n, Body body) {
  std::int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) body(j, kLanes);
  if (j < n) body(j, n - j);
}

__attribute__((target_clones("avx2", "default"))) float RowMax(const float* x, std::int64_t n) {
  constexpr float kLowest = -std::numeric_limits<float>::infinity();
  Float8 max = Load(x, 0, kLowest);
  ForLanes(
      n, [&](std::int64_t j, std::int64_t count) __attribute__((always_inline)) {
        const Float8 v = Load(x + j, count, kLowest);
        max = v > max ? v : max;
      });
  float result = kLowest;
  for (std::int64_t l = 0; l < kLanes; ++l) result = std::max(result, max[l]);
  return result;
}

// e[j] = exp(x[j] * scale - shift) for j < n; returns their sum.
__attribute__((target_clones("avx2", "default"))) float ExpRow(const float* x, std::int64_t n,
                                                               float scale, float shift, float* e) {
  Float8 sum = {};
  ForLanes(
      n, [&](std::int64_t j, std::int64_t count) __attribute__((always_inline)) {
        Float8 v = Exp(Load(x + j, count) * scale - shift);
        if (count < kLanes) v *= FirstLanes(count);  // the padding's exp is not 0
        sum += v;
        StoreLanes(v, e + j, count);
      });
  float result = 0;
  for (std::int64_t l = 0; l < kLanes; ++l) result += sum[l];
  return result;
}

// p[j] = e[j] * kept_scale where keep[j], else 0.
__attribute__((target_clones("avx2", "default"))) void DropRow(const float* e,
                                                               const std::uint8_t* keep,
                                                               std::int64_t n, float kept_scale,
                                                               float* p) {
  ForLanes(
      n, [&](std::int64_t j, std::int64_t count) __attribute__((always_inline)) {
        StoreLanes(Load(e + j, count) * KeepMask(keep + j, count) * kept_scale, p + j, count);
      });
}

// The backward of one row of dropout(softmax(s * scale)), from the saved log-sum-exp `lse`:
// pd = the dropped-out weights (for dV), ds = the gradient of the unscaled scores s. As
// softmax's own backward: ds = p * (dp - sum(p * dp)), with dp = keep * dpd / (1 - p), so a
// row of one key gets exactly 0.
__attribute__((target_clones("avx2", "default"))) void SoftmaxDropoutBackwardRow(
    const float* s, const float* dpd, const std::uint8_t* keep, std::int64_t n, float scale,
    float lse, float kept_scale, float* pd, float* ds) {
  Float8 sum = {};
  ForLanes(
      n, [&](std::int64_t j, std::int64_t count) __attribute__((always_inline)) {
        Float8 p = Exp(Load(s + j, count) * scale - lse);
        if (count < kLanes) p *= FirstLanes(count);
        const Float8 dropped = p * KeepMask(keep + j, count) * kept_scale;
        sum += dropped * Load(dpd + j, count);
        StoreLanes(dropped, pd + j, count);
        StoreLanes(p, ds + j, count);
      });
  float d = 0;
  for (std::int64_t l = 0; l < kLanes; ++l) d += sum[l];
  ForLanes(
      n, [&](std::int64_t j, std::int64_t count) __attribute__((always_inline)) {
        const Float8 dp = Load(dpd + j, count) * KeepMask(keep + j, count) * kept_scale;
        StoreLanes(Load(ds + j, count) * (dp - d) * scale, ds + j, count);
      });
}

// ---- Rows of the blocks, in the tensors' dtype ---------------------------------------------

// A row of `scalar_t` read as floats: the row itself for float, else a converted copy.
template <typename scalar_t>
const float* AsFloat(const scalar_t* row, std::int64_t n, std::vector<float>& buffer) {
  if constexpr (std::is_same_v<scalar_t, float>) {
    return row;
  } else {
    buffer.resize(static_cast<std::size_t>(n));
    for (std::int64_t j = 0; j < n; ++j) buffer[j] = static_cast<float>(row[j]);
    return buffer.data();
  }
}

// Writes the floats of columns [lo, n) to `row` and zeros to the rest of its `width` (the
// masked columns).
template <typename scalar_t>
void Store(const float* values, std::int64_t lo, std::int64_t n, std::int64_t width,
           scalar_t* row) {
  std::fill(row, row + lo, static_cast<scalar_t>(0));
  if constexpr (std::is_same_v<scalar_t, float>) {
    if (values != row + lo) {
      std::memcpy(row + lo, values, static_cast<std::size_t>(n - lo) * sizeof(float));
    }
  } else {
    for (std::int64_t j = lo; j < n; ++j) row[j] = static_cast<scalar_t>(values[j - lo]);
  }
  std::fill(row + n, row + width, static_cast<scalar_t>(0));
}

// A block of queries of a range of heads of one sample. Blocks are [heads, rows, width]: block
// row r is query i0 + r % rows of head first_head + r / rows (head g: sample g / H, head g % H),
// column c key k0 + c.
struct BlockShape {
  std::int64_t first_head;
  std::int64_t heads;
  std::int64_t n_head;  // H
  std::int64_t t;
  std::int64_t i0;
  std::int64_t rows;
  const std::int64_t* first;  // the sample's first visible key of each query; nullptr: 0
  std::int64_t k0;            // the first key any of the block's queries sees
  std::int64_t width;         // the keys from k0 up to the block's last query

  std::int64_t Head(std::int64_t r) const { return first_head + r / rows; }
  std::int64_t Query(std::int64_t r) const { return i0 + r % rows; }
  std::int64_t FirstKey(std::int64_t i) const { return first == nullptr ? 0 : first[i]; }
};

// The blocks of `rows_per_block` queries of heads [first_head, first_head + heads), in order.
std::vector<BlockShape> BlocksOf(std::int64_t first_head, std::int64_t heads, std::int64_t n_head,
                                 std::int64_t t, std::int64_t rows_per_block,
                                 const std::int64_t* first) {
  std::vector<BlockShape> blocks;
  for (std::int64_t i0 = 0; i0 < t; i0 += rows_per_block) {
    const std::int64_t rows = std::min(rows_per_block, t - i0);
    BlockShape block{first_head, heads, n_head, t, i0, rows, first, 0, 0};
    block.k0 = block.FirstKey(i0);
    for (std::int64_t i = i0 + 1; i < i0 + rows; ++i)
      block.k0 = std::min(block.k0, block.FirstKey(i));
    block.width = i0 + rows - block.k0;
    blocks.push_back(block);
  }
  return blocks;
}

// The keep flags of keys [j0, j0 + n) of query i's weights in head g: elements (h, i, j) of the
// sample's [H, T, T] weights, as ExplicitCausalAttention's dropout numbers them.
void AttentionKeepFlags(const std::optional<DropoutCounters>& dropout, const BlockShape& shape,
                        std::int64_t g, std::int64_t i, std::int64_t j0, std::int64_t n,
                        std::uint8_t* keep) {
  if (!dropout) {
    std::fill(keep, keep + n, std::uint8_t{1});
    return;
  }
  const std::int64_t h = g % shape.n_head;
  KeepFlags(dropout->RowSeed(g / shape.n_head),
            static_cast<std::uint32_t>((h * shape.t + i) * shape.t + j0), n, dropout->KeepBelow(),
            keep);
}

// One thread's row buffers, for rows up to `width` long.
struct RowScratch {
  explicit RowScratch(std::int64_t width)
      : c(static_cast<std::size_t>(width)),
        d(static_cast<std::size_t>(width)),
        keep(static_cast<std::size_t>(width)) {}
  std::vector<float> a, b;  // rows converted to float, where they are not float
  std::vector<float> c, d;
  std::vector<std::uint8_t> keep;
};

// Scores S of a block to its dropped-out weights P, in place; lse[g * T + i] gets each row's
// log-sum-exp of the scaled scores.
template <typename scalar_t>
void SoftmaxDropoutForward(torch::Tensor& scores, const BlockShape& shape, float scale,
                           const std::optional<DropoutCounters>& dropout, float* lse,
                           RowScratch& scratch) {
  scalar_t* data = scores.data_ptr<scalar_t>();
  const float kept_scale = dropout ? static_cast<float>(dropout->KeptScale()) : 1.0F;
  for (std::int64_t r = 0; r < shape.heads * shape.rows; ++r) {
    // Columns [lo, end) of the row: its query's visible keys.
    const std::int64_t g = shape.Head(r), i = shape.Query(r), first = shape.FirstKey(i);
    const std::int64_t lo = first - shape.k0, end = i + 1 - shape.k0, n = end - lo;
    scalar_t* row = data + r * shape.width;
    const float* s = AsFloat(row + lo, n, scratch.a);
    float* e = scratch.c.data();
    const float max = RowMax(s, n) * scale;
    const float sum = ExpRow(s, n, scale, max, e);
    lse[g * shape.t + i] = max + std::log(sum);
    AttentionKeepFlags(dropout, shape, g, i, first, n, scratch.keep.data());
    DropRow(e, scratch.keep.data(), n, kept_scale / sum, e);
    Store(e, lo, end, shape.width, row);
  }
}

// From the recomputed scores S and dPd = dO v^T of a block, in place: S becomes the dropped-out
// weights Pd, dPd the gradient of the unscaled scores.
template <typename scalar_t>
void SoftmaxDropoutBackward(torch::Tensor& scores, torch::Tensor& grad, const BlockShape& shape,
                            float scale, const std::optional<DropoutCounters>& dropout,
                            const float* lse, RowScratch& scratch) {
  scalar_t* s_data = scores.data_ptr<scalar_t>();
  scalar_t* g_data = grad.data_ptr<scalar_t>();
  const float kept_scale = dropout ? static_cast<float>(dropout->KeptScale()) : 1.0F;
  for (std::int64_t r = 0; r < shape.heads * shape.rows; ++r) {
    const std::int64_t g = shape.Head(r), i = shape.Query(r), first = shape.FirstKey(i);
    const std::int64_t lo = first - shape.k0, end = i + 1 - shape.k0, n = end - lo;
    scalar_t* s_row = s_data + r * shape.width;
    scalar_t* g_row = g_data + r * shape.width;
    const float* s = AsFloat(s_row + lo, n, scratch.a);
    const float* dpd = AsFloat(g_row + lo, n, scratch.b);
    AttentionKeepFlags(dropout, shape, g, i, first, n, scratch.keep.data());
    float* pd = scratch.c.data();
    float* ds = scratch.d.data();
    SoftmaxDropoutBackwardRow(s, dpd, scratch.keep.data(), n, scale, lse[g * shape.t + i],
                              kept_scale, pd, ds);
    Store(pd, lo, end, shape.width, s_row);
    Store(ds, lo, end, shape.width, g_row);
  }
}

// Heads [h0, h0 + heads) of one sample: the flat heads [B * H] from first_head = sample * H
// + h0 on, the numbering of the dropout mask and of the log-sum-exp.
struct HeadGroup {
  std::int64_t sample, h0, heads, n_head;

  std::int64_t FirstHead() const { return sample * n_head + h0; }
  // Its heads of x [B, H, T, D]: [heads, T, D].
  torch::Tensor Of(const torch::Tensor& x) const {
    return x.select(0, sample).narrow(0, h0, heads);
  }
};

// Runs `step(group)` on the heads of each sample, the B * H heads split into one range per
// thread. Heads are independent, so the threads never wait for each other; inside, LibTorch's
// and BLAS's own threading is off (nested parallelism runs serially) and autograd records
// nothing (grad mode is per thread, and a pool thread's is on).
template <typename Step>
void ForEachHeadGroup(std::int64_t batch, std::int64_t n_head, Step step) {
  RECORD_USER_SCOPE(kAttentionScope);
  at::parallel_for(0, batch * n_head, /*grain_size=*/1, [&](std::int64_t begin, std::int64_t end) {
    const torch::NoGradGuard no_grad;
    for (std::int64_t g = begin; g < end;) {
      const HeadGroup group{g / n_head, g % n_head, std::min(end - g, n_head - g % n_head), n_head};
      step(group);
      g += group.heads;
    }
  });
}

// [B, T, H * D] seen as its heads [B, H, T, D].
torch::Tensor HeadsOf(const torch::Tensor& merged, std::int64_t n_head) {
  return merged.view({merged.size(0), merged.size(1), n_head, -1}).transpose(1, 2);
}

// q, k, v [B, H, T, D], each with its last dimension contiguous, the dropout's counters and
// the first visible keys (visible_keys.h; contiguous, or undefined).
struct AttentionInputs {
  torch::Tensor q, k, v;
  std::optional<DropoutCounters> dropout;
  torch::Tensor first;
  std::int64_t rows_per_block;

  std::int64_t Batch() const { return q.size(0); }
  std::int64_t Heads() const { return q.size(1); }
  std::int64_t Length() const { return q.size(2); }
  float Scale() const { return static_cast<float>(1 / std::sqrt(static_cast<double>(q.size(3)))); }
  std::vector<BlockShape> Blocks(const HeadGroup& group) const {
    const std::int64_t* sample_first =
        first.defined()
            ? first.data_ptr<std::int64_t>() + (first.size(0) == 1 ? 0 : group.sample) * Length()
            : nullptr;
    return BlocksOf(group.FirstHead(), group.heads, Heads(), Length(), rows_per_block,
                    sample_first);
  }
};

// Fills the group's rows of o [B, H, T, D] and lse (float [B * H, T]).
void ForwardHeads(const AttentionInputs& in, const HeadGroup& group, const torch::Tensor& o_all,
                  torch::Tensor& lse) {
  const torch::Tensor q = group.Of(in.q), k = group.Of(in.k), v = group.Of(in.v),
                      o = group.Of(o_all);
  RowScratch scratch(in.Length());
  for (const BlockShape& shape : in.Blocks(group)) {
    torch::Tensor weights = torch::empty({shape.heads, shape.rows, shape.width}, q.options());
    BatchedProduct(weights, q.narrow(1, shape.i0, shape.rows),
                   k.narrow(1, shape.k0, shape.width).transpose(1, 2), /*accumulate=*/false);
    AT_DISPATCH_FLOATING_TYPES_AND2(
        at::kBFloat16, at::kHalf, weights.scalar_type(), "blockwise_attention_forward", [&] {
          SoftmaxDropoutForward<scalar_t>(weights, shape, in.Scale(), in.dropout,
                                          lse.data_ptr<float>(), scratch);
        });
    BatchedProduct(o.narrow(1, shape.i0, shape.rows), weights, v.narrow(1, shape.k0, shape.width),
                   /*accumulate=*/false);
  }
}

// Adds the group's gradients to dq, dk, dv (float [B, H, T, D]), from dO [B, H, T, D] and the
// forward's lse.
void BackwardHeads(const AttentionInputs& in, const HeadGroup& group, const torch::Tensor& d_o_all,
                   const torch::Tensor& lse, const torch::Tensor& dq_all,
                   const torch::Tensor& dk_all, const torch::Tensor& dv_all) {
  const torch::Tensor q = group.Of(in.q), k = group.Of(in.k), v = group.Of(in.v),
                      d_o = group.Of(d_o_all);
  const torch::Tensor dq = group.Of(dq_all), dk = group.Of(dk_all), dv = group.Of(dv_all);
  RowScratch scratch(in.Length());
  for (const BlockShape& shape : in.Blocks(group)) {
    const torch::Tensor q_block = q.narrow(1, shape.i0, shape.rows);
    const torch::Tensor d_o_block = d_o.narrow(1, shape.i0, shape.rows);
    const torch::Tensor keys = k.narrow(1, shape.k0, shape.width);
    torch::Tensor weights = torch::empty({shape.heads, shape.rows, shape.width}, q.options());
    torch::Tensor grad_scores = torch::empty_like(weights);
    BatchedProduct(weights, q_block, keys.transpose(1, 2), /*accumulate=*/false);
    BatchedProduct(grad_scores, d_o_block, v.narrow(1, shape.k0, shape.width).transpose(1, 2),
                   /*accumulate=*/false);
    AT_DISPATCH_FLOATING_TYPES_AND2(
        at::kBFloat16, at::kHalf, weights.scalar_type(), "blockwise_attention_backward", [&] {
          SoftmaxDropoutBackward<scalar_t>(weights, grad_scores, shape, in.Scale(), in.dropout,
                                           lse.data_ptr<float>(), scratch);
        });
    BatchedProduct(dv.narrow(1, shape.k0, shape.width), weights.transpose(1, 2), d_o_block,
                   /*accumulate=*/true);
    BatchedProduct(dq.narrow(1, shape.i0, shape.rows), grad_scores, keys, /*accumulate=*/false);
    BatchedProduct(dk.narrow(1, shape.k0, shape.width), grad_scores.transpose(1, 2), q_block,
                   /*accumulate=*/true);
  }
}

// x [B, H, T, D] as the products take it: float views as they are when their last dimension
// is contiguous (the heads of the qkv projection are), the others copied contiguous.
torch::Tensor AsProductInput(const torch::Tensor& x) {
  return x.scalar_type() == torch::kFloat && x.stride(3) == 1 ? x : x.contiguous();
}

AttentionInputs InputsOf(const torch::autograd::AutogradContext* context,
                         const torch::autograd::variable_list& saved) {
  const c10::IValue& first = context->saved_data.at("first");
  return {saved[0],
          saved[1],
          saved[2],
          SavedDropoutCounters(context),
          first.isTensor() ? first.toTensor() : torch::Tensor(),
          context->saved_data.at("rows_per_block").toInt()};
}

// The first keys as the autograd function takes them: not a tensor argument (autograd would
// take it for an input, and an undefined one has no device).
struct FirstKeys {
  torch::Tensor first;
};

class BlockwiseAttentionFunction : public torch::autograd::Function<BlockwiseAttentionFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* context, const torch::Tensor& q_in,
                               const torch::Tensor& k_in, const torch::Tensor& v_in,
                               const std::optional<DropoutCounters>& dropout, const FirstKeys& keys,
                               std::int64_t rows_per_block) {
    const std::int64_t b = q_in.size(0), h = q_in.size(1), t = q_in.size(2), d = q_in.size(3);
    SaveDropoutCounters(context, dropout);
    context->saved_data["first"] = keys.first.defined() ? c10::IValue(keys.first) : c10::IValue();
    context->saved_data["rows_per_block"] = rows_per_block;
    const torch::autograd::variable_list inputs = {AsProductInput(q_in), AsProductInput(k_in),
                                                   AsProductInput(v_in)};
    const AttentionInputs in = InputsOf(context, inputs);
    torch::Tensor out = torch::empty({b, t, h * d}, in.q.options());
    torch::Tensor lse = torch::empty({b * h, t}, in.q.options().dtype(torch::kFloat));
    const torch::Tensor o = HeadsOf(out, h);
    ForEachHeadGroup(b, h, [&](const HeadGroup& group) { ForwardHeads(in, group, o, lse); });
    context->save_for_backward({in.q, in.k, in.v, lse});
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* context,
                                                 torch::autograd::variable_list grads) {
    const torch::autograd::variable_list saved = context->get_saved_variables();
    const AttentionInputs in = InputsOf(context, saved);
    const torch::Tensor& lse = saved[3];
    const std::int64_t h = in.Heads();
    const torch::Tensor d_o = HeadsOf(grads[0].to(in.q.scalar_type()).contiguous(), h);
    const auto accumulator = in.q.options().dtype(torch::kFloat);
    const std::vector<std::int64_t> merged = {in.Batch(), in.Length(), h * in.q.size(3)};
    torch::Tensor dq = torch::empty(merged, accumulator);
    torch::Tensor dk = torch::zeros(merged, accumulator);
    torch::Tensor dv = torch::zeros(merged, accumulator);
    ForEachHeadGroup(in.Batch(), h, [&](const HeadGroup& group) {
      BackwardHeads(in, group, d_o, lse, HeadsOf(dq, h), HeadsOf(dk, h), HeadsOf(dv, h));
    });
    auto split_heads = [&](const torch::Tensor& x) { return HeadsOf(x.to(in.q.scalar_type()), h); };
    return {split_heads(dq), split_heads(dk), split_heads(dv),
            torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

bool BlockwiseAttentionSupports(const torch::Tensor& q) {
  const auto dtype = q.scalar_type();
  return q.is_cpu() && q.dim() == 4 &&
         (dtype == torch::kFloat || dtype == torch::kBFloat16 || dtype == torch::kHalf);
}

torch::Tensor BlockwiseCausalAttention(const torch::Tensor& q, const torch::Tensor& k,
                                       const torch::Tensor& v,
                                       const std::optional<DropoutCounters>& dropout,
                                       const torch::Tensor& first, std::int64_t rows_per_block) {
  TORCH_CHECK(rows_per_block > 0, "BlockwiseCausalAttention: rows_per_block ", rows_per_block,
              " is not positive");
  TORCH_CHECK(BlockwiseAttentionSupports(q),
              "BlockwiseCausalAttention takes CPU float, bfloat16 or half q [B, H, T, D], got ",
              q.scalar_type(), " ", q.sizes(), " on ", q.device());
  TORCH_CHECK(q.sizes() == k.sizes() && q.sizes() == v.sizes() &&
                  q.scalar_type() == k.scalar_type() && q.scalar_type() == v.scalar_type(),
              "BlockwiseCausalAttention: q, k and v differ in shape or dtype");
  if (!first.defined())
    return BlockwiseAttentionFunction::apply(q, k, v, dropout, FirstKeys{}, rows_per_block);
  const std::int64_t t = q.size(2);
  TORCH_CHECK(first.dim() == 2 && (first.size(0) == 1 || first.size(0) == q.size(0)) &&
                  first.size(1) == t && first.scalar_type() == torch::kLong && first.is_cpu(),
              "BlockwiseCausalAttention: first keys [1 or B, T] int64 on the CPU, got ",
              first.scalar_type(), " ", first.sizes());
  const torch::Tensor queries = torch::arange(t, torch::kLong);
  TORCH_CHECK(first.ge(0).logical_and(first.le(queries)).all().item<bool>(),
              "BlockwiseCausalAttention: a query's first key is negative or after it");
  return BlockwiseAttentionFunction::apply(q, k, v, dropout, FirstKeys{first.contiguous()},
                                           rows_per_block);
}

}  // namespace trainerd
