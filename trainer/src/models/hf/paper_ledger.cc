#include "trainerd/trainer/models/paper_ledger.h"

#include <algorithm>

#include "models/hf/hf_config_spec.h"

namespace trainerd {
namespace {

// What a checkpointed layer keeps besides its input: the random-number states it restores to
// recompute (measured: 5 056 bytes on every model and precision).
constexpr std::int64_t kCheckpointStateBytes = 5056;
// The loss's scalars.
constexpr std::int64_t kLossBytes = 12;
// The elements of a gradient the step inside the backward copies to fp64 at a time for its
// norm (kNormSlice, loop/in_backward_model_state.h).
constexpr std::int64_t kNormSlice = std::int64_t{1} << 16;

// Bytes a layer keeps for its backward: per sample and position, and once (autocast's cast
// copies of the weights, the rotary tables).
struct Kept {
  std::int64_t per_position = 0;
  std::int64_t fixed = 0;
};

}  // namespace

Result<PaperModel> PaperModel::Read(const std::string& folder) {
  Result<HfDecoderConfig> config = ReadHfConfig(folder);
  if (!config.ok()) return config.status();
  PaperModel model;
  model.architecture_ = config->architecture;
  model.gpt2_ = config->model_type == "gpt2";
  model.vocab_ = config->vocab_size;
  model.hidden_ = config->hidden_size;
  model.intermediate_ = config->intermediate_size;
  model.layers_ = config->num_hidden_layers;
  model.heads_ = config->num_attention_heads;
  model.kv_heads_ = config->num_key_value_heads;
  model.head_dim_ = config->head_dim;
  model.max_positions_ = config->max_position_embeddings;
  model.tied_ = config->tie_word_embeddings;
  model.qkv_bias_ = config->qkv_bias;
  model.o_bias_ = config->o_bias;
  model.mlp_bias_ = config->mlp_bias;
  model.attention_dropout_ = config->attention_dropout > 0;
  return model;
}

std::int64_t PaperModel::LinearParameters() const {
  const std::int64_t h = hidden_, inner = intermediate_;
  if (gpt2_) return 4 * h * h + 2 * h * inner + 5 * h + inner;  // c_attn, c_proj, c_fc, c_proj
  const std::int64_t q = heads_ * head_dim_, kv = kv_heads_ * head_dim_;
  return 2 * h * q + 2 * h * kv + 3 * h * inner;  // q, o; k, v; gate, up, down
}

std::int64_t PaperModel::LayerParameters() const {
  const std::int64_t h = hidden_, inner = intermediate_;
  if (gpt2_) return LinearParameters() + 4 * h;  // two LayerNorms, weight and bias
  const std::int64_t q = heads_ * head_dim_, kv = kv_heads_ * head_dim_;
  return LinearParameters() + (qkv_bias_ ? q + 2 * kv : 0) + (o_bias_ ? h : 0) +
         (mlp_bias_ ? 2 * inner + h : 0) + 2 * h;  // two RMSNorms
}

std::int64_t PaperModel::parameters() const {
  const std::int64_t embeddings =
      vocab_ * hidden_ * (tied_ ? 1 : 2) + (gpt2_ ? max_positions_ * hidden_ : 0);
  const std::int64_t final_norm = gpt2_ ? 2 * hidden_ : hidden_;
  return embeddings + layers_ * LayerParameters() + final_norm;
}

std::vector<PaperModel::LinearLayer> PaperModel::LayerLinears() const {
  const std::int64_t h = hidden_, inner = intermediate_;
  if (gpt2_) {
    return {{"attn.c_attn", h, 3 * h},
            {"attn.c_proj", h, h},
            {"mlp.c_fc", h, inner},
            {"mlp.c_proj", inner, h}};
  }
  const std::int64_t q = heads_ * head_dim_, kv = kv_heads_ * head_dim_;
  return {{"self_attn.q_proj", h, q}, {"self_attn.k_proj", h, kv}, {"self_attn.v_proj", h, kv},
          {"self_attn.o_proj", q, h}, {"mlp.gate_proj", h, inner}, {"mlp.up_proj", h, inner},
          {"mlp.down_proj", inner, h}};
}

PaperModel::LayerAdapters PaperModel::AdaptersOfLayer(const FinetuneSpec& adapters) const {
  LayerAdapters sum;
  for (const LinearLayer& linear : LayerLinears()) {
    const bool named = std::any_of(
        adapters.targets.begin(), adapters.targets.end(),
        [&](const std::string& target) { return TargetNamesModule(target, linear.path); });
    if (!named) continue;
    sum.parameters += adapters.rank * (linear.in + linear.out);
    sum.inputs += linear.in;
    ++sum.layers;
  }
  return sum;
}

Result<std::int64_t> PaperModel::AdapterParameters(const FinetuneSpec& adapters) const {
  for (const std::string& target : adapters.targets) {
    FinetuneSpec one = adapters;
    one.targets = {target};
    if (AdaptersOfLayer(one).layers == 0) {
      std::string names;
      for (const LinearLayer& linear : LayerLinears()) {
        names += (names.empty() ? "" : ", ") + linear.path.substr(linear.path.find('.') + 1);
      }
      return Status::InvalidArgument("adapter target '" + target + "' names no linear layer of " +
                                     architecture_ + "; its layers: " + names);
    }
  }
  return layers_ * AdaptersOfLayer(adapters).parameters;
}

std::vector<std::string> PaperModel::DefaultAdapterTargets() const {
  if (gpt2_) return {"c_attn"};
  return {"q_proj", "v_proj"};
}

MemoryLedger PaperModel::Ledger(const PaperShape& shape, std::int64_t budget_bytes,
                                std::int64_t usable_bytes) const {
  const std::int64_t t = shape.block_size, m = shape.microbatch, h = hidden_, inner = intermediate_,
                     v = vocab_, heads = heads_, d = head_dim_;
  const std::int64_t q = heads * d, kv = kv_heads_ * d;
  const bool half = shape.precision != Precision::kFp32;
  const bool v2 = shape.libtorch == PaperLibTorch::k2;
  // The kernel a Llama layer trains with: 2.x's scaled_dot_product_attention, or the blockwise
  // one where attention dropout is drawn (and always under 1.x; models/gpt/gpt.h).
  const bool blockwise = !v2 || attention_dropout_;
  // Per layer, and outside the layers (embeddings, final norm, head, loss): the coefficients
  // are bytes per position of each width, fitted to measured ledgers (docs/hugging-face.md).
  Kept layer, outside;
  // Frozen linear weights stored in bf16 (finetune.base_dtype): half their bytes, and no cast
  // copy kept for the backward (autocast takes them as they are; fp32 widens them anew).
  const bool narrow_base = shape.adapters && shape.adapters->base_dtype == Precision::kBf16;
  std::int64_t weights_in_linears = 0;
  for (const LinearLayer& linear : LayerLinears()) weights_in_linears += linear.in * linear.out;
  // autocast's bf16/fp16 copies of the weights
  layer.fixed = half ? 2 * (LinearParameters() - (narrow_base ? weights_in_linears : 0)) : 0;
  if (gpt2_) {
    layer.per_position = (half ? 20 * h + 4 * inner : 32 * h + 8 * inner) + 16 + 4 * heads;
    outside.per_position = 4 * v + (half ? 6 : 8) * h + 8;
    outside.fixed = (half ? 2 * v * h : 8 * t) + kLossBytes;
  } else {
    // q, k and v per query head, the attention's output and the MLP's four products: in the
    // plan's precision; the residual stream and the RMSNorms in fp32.
    const std::int64_t per_element = half ? 8 : 16;
    layer.per_position =
        (half ? (v2 ? 26 : 34) : (v2 ? 24 : 32)) * h + per_element * (q + inner) + 8 + 4 * heads;
    // With one key/value head, k and v are expanded as views: 2.x's
    // scaled_dot_product_attention (no attention dropout) takes them so, and the blockwise
    // kernel in fp32 (in bf16 and fp16 it copies them).
    if ((!blockwise || !half) && kv_heads_ == 1) {
      layer.per_position -= per_element / 2 * (q - kv);
    }
    if (half) layer.fixed += 8 * t * d;  // the rotary tables cast for q and k
    outside.per_position = 4 * v + (half ? (v2 ? 10 : 14) : (v2 ? 12 : 16)) * h + 4;
    outside.fixed = (half ? 2 * v * h : 8 * t * d) + kLossBytes;
  }
  // With adapters, each keeps its rank-wide product, and its input where dropout makes that a
  // new tensor.
  const LayerAdapters adapters =
      shape.adapters ? AdaptersOfLayer(*shape.adapters) : LayerAdapters{};
  if (shape.adapters) {
    layer.per_position += 4 * (adapters.layers * shape.adapters->rank +
                               (shape.adapters->dropout > 0 ? adapters.inputs : 0));
  }
  const std::int64_t layer_bytes = m * t * layer.per_position + layer.fixed;
  const std::int64_t checkpointed_bytes = m * t * h * 4 + kCheckpointStateBytes;
  // GPT-2's layer forward alone (the ledger's per-block figure) keeps its weights' casts.
  const std::int64_t checkpointed_shown = checkpointed_bytes + (gpt2_ ? layer.fixed : 0);

  MemoryLedger ledger;
  ledger.plan.microbatch = shape.microbatch;
  ledger.plan.accumulation_steps = shape.accumulation_steps;
  ledger.plan.precision = shape.precision;
  ledger.plan.optimizer_state = shape.optimizer_state;
  ledger.plan.zero_stage = shape.zero_stage;
  ledger.plan.output_chunk = shape.output_chunk;
  ledger.plan.step_in_backward = shape.step_in_backward;
  ledger.budget_bytes = budget_bytes;
  ledger.usable_bytes = usable_bytes;
  ledger.method = std::string("paper: formulas fitted to ledgers measured under LibTorch ") +
                  (v2 ? "2.x" : "1.x");
  for (int i = 0; i < layers_; ++i) {
    if (shape.checkpoint_all) ledger.plan.checkpoint_blocks.push_back(i);
    ledger.blocks.push_back({i, layer_bytes, checkpointed_shown, 0.0});
  }
  // What trains: every parameter, or with adapters only theirs.
  const std::int64_t frozen = shape.adapters ? this->parameters() : 0;
  const std::int64_t trained = shape.adapters ? layers_ * adapters.parameters : this->parameters();
  const std::int64_t narrow = narrow_base ? layers_ * weights_in_linears : 0;
  // fp32 master weights at every precision
  ledger.frozen_parameters_bytes = 4 * frozen - 2 * narrow;
  ledger.parameters_bytes = ledger.frozen_parameters_bytes + 4 * trained;
  ledger.gradients_bytes = shape.step_in_backward ? 0 : 4 * trained;
  if (shape.optimizer_state == StatePlacement::kHost) {
    ledger.host = HostLedger{4 * trained, 4 * trained, 8 * trained, 0, 16 * trained, 0};
  } else {
    ledger.optimizer_state_bytes = 8 * trained;  // AdamW's two moments
  }
  ledger.inputs_bytes = std::int64_t{shape.accumulation_steps} * m * t * 16;  // int64 ids, targets
  ledger.activations_bytes = layers_ * (shape.checkpoint_all ? checkpointed_bytes : layer_bytes) +
                             m * t * outside.per_position + outside.fixed;
  // Of those, the output layer's (MemoryLedger::output_layer_bytes): the loss's fp32
  // log-probabilities, the loss; in bf16 and fp16 autocast's copies of the hidden states and
  // of the head's weight, which the head's product keeps. In chunks it keeps only the loss;
  // the chunks keep the fp32 hidden states, which the whole head kept only for its weight's
  // gradient at fp32 (a frozen head, under adapters, needs none).
  const std::int64_t chunk = std::min(std::int64_t{shape.output_chunk}, m * t);
  const std::int64_t whole_output =
      m * t * (4 * v + (half ? 2 * h : 0)) + (half ? 2 * v * h : 0) + kLossBytes;
  ledger.output_layer_bytes = chunk > 0 ? 4 : whole_output;
  ledger.activations_bytes -=
      whole_output - (chunk > 0 && (half || shape.adapters) ? 4 * m * t * h : 0);
  // Offloaded, the layers' saved tensors are in host memory, copied back one node's at a time;
  // the fp32 rotary tables, shared by the layers outside them, are saved by each layer's
  // products: every layer's copy holds them, and the device none (in bf16 the layers save
  // their casts, already in the layer's bytes).
  const bool offloaded = shape.offload_activations && !shape.checkpoint_all;
  if (offloaded) {
    ledger.plan.offload_activations = true;
    const std::int64_t shared = !gpt2_ && !half ? 8 * t * d : 0;
    ledger.activations_bytes -= layers_ * layer_bytes + shared;
    if (!ledger.host) ledger.host = HostLedger{};
    ledger.host->activations_bytes = layers_ * (layer_bytes + shared);
    ledger.host->peak_bytes += ledger.host->activations_bytes;
  }
  // The output layer's backward. Whole: the logits' gradient and the loss's, fp32. In chunks
  // (measured on twins of vocabulary 4096): the hidden states' gradient, a trained head's
  // gradient summed over the chunks, and the larger of a chunk's weight gradient (fp32; in
  // bf16 and fp16 its cast, beside the weight's copy) and a chunk's logits, log-probabilities
  // and their gradients; the first chunk's gradient is the sum, so one chunk has none besides.
  const bool head_trained = !shape.adapters;
  const std::int64_t logits = 8 * m * t * v, chunk_logits = 12 * chunk * v;
  const std::int64_t head = v * h, summed = head_trained && chunk < m * t ? 4 * head : 0;
  const std::int64_t output_backward =
      chunk == 0 ? logits
      : half     ? 6 * m * t * h + summed +
                   std::max(head_trained ? 6 * head : 0, 2 * head + chunk_logits) + 12
             : 4 * m * t * h + summed +
                   std::max(head_trained ? 4 * head + 4 * chunk * v : 0, chunk_logits) + 12;
  // A trained tied head's gradient meets the embedding's at the end of the backward, when the
  // activations are gone: the two and their sum.
  const std::int64_t tied_sum =
      tied_ && head_trained ? 12 * head + 12 - ledger.activations_bytes - ledger.output_layer_bytes
                            : 0;
  // With every layer checkpointed, or when it is more, one recomputed layer with a tied
  // head's second gradient (GPT-2 holds both with the whole logits): a Llama layer under
  // scaled_dot_product_attention with its weights' casts; under the blockwise kernel without
  // them, and with 1.x's two hidden-wide tensors whichever LibTorch runs.
  // GPT-2's blockwise kernel in fp32 makes no copies of q, k, v and its unmerged output (5 h).
  const std::int64_t in_place = gpt2_ && blockwise && !half ? 20 * h : 0;
  const std::int64_t recomputed_layer = gpt2_ ? m * t * (layer.per_position - in_place)
                                        : blockwise
                                            ? m * t * (layer.per_position + (v2 ? 8 * h : 0))
                                            : layer_bytes;
  const std::int64_t recomputed = recomputed_layer + (tied_ ? 4 * head : 0);
  ledger.temporaries_bytes = std::max(
      tied_sum, shape.checkpoint_all
                    ? std::max(output_backward, recomputed) + (gpt2_ && chunk == 0 ? logits : 0)
                    : output_backward);
  // Offloaded, GPT-2's blockwise kernel at fp32, which read q, k, v and its output in place in
  // the forward, copies them in the backward from their restored product, beside the MLP's
  // two inner-wide products (measured on the GPT-2 twin; a Llama's backward restores no more
  // than it frees).
  if (offloaded && gpt2_ && blockwise && !half) {
    ledger.temporaries_bytes += m * t * (20 * h + 8 * inner + 8);
  }
  // Stepped inside the backward, a gradient lives from its accumulation to its step: beyond
  // the backward's other phases only an untied trained head's shows, complete while every
  // activation is still alive: its gradient with its norm's fp64 slices (kNormSlice), and
  // under 1.x AdamW's two temporaries of its size (2.x's fused kernel has none); and the
  // step's norm, a double.
  if (shape.step_in_backward) {
    const std::int64_t head_step =
        !tied_ && head_trained ? (v2 ? 4 * head + 16 * std::min(head, kNormSlice) : 12 * head) : 0;
    ledger.temporaries_bytes = std::max(ledger.temporaries_bytes, head_step) + 8;
  }
  if (shape.zero_stage > 0 && shape.ranks > 1) {  // as MeasureLedger shows a sharded plan
    const auto shard = [&shape](std::int64_t bytes) {
      return (bytes + shape.ranks - 1) / shape.ranks;
    };
    ledger.sharded_over_ranks = shape.ranks;
    ledger.optimizer_state_on_other_ranks =
        ledger.optimizer_state_bytes - shard(ledger.optimizer_state_bytes);
    ledger.optimizer_state_bytes -= ledger.optimizer_state_on_other_ranks;
    if (shape.zero_stage == 2) {  // the other shards' gradients live through a backward
      const std::int64_t others = ledger.gradients_bytes - shard(ledger.gradients_bytes);
      ledger.gradients_bytes -= others;
      ledger.temporaries_bytes += others;
    }
  }
  const std::int64_t state =
      ledger.parameters_bytes + ledger.gradients_bytes + ledger.optimizer_state_bytes;
  const std::int64_t update = state + ledger.inputs_bytes + ledger.activations_bytes +
                              ledger.output_layer_bytes + ledger.temporaries_bytes;
  // The evaluation: the held-out batch, and per position the larger of the logits with the
  // loss's log-probabilities and a layer's forward without a graph.
  // GPT-2's under 1.x (the blockwise kernel, on fp32 activations whatever the plan) reads q,
  // k and v in place in its c_attn output and writes its output merged: no copies of either.
  const std::int64_t layer_forward = !gpt2_ ? 4 * (4 * h + 4 * inner + 4 * heads)
                                     : v2   ? 4 * (2 * h + 3 * inner + 2 * heads)
                                            : 4 * (h + 4 * inner + heads);
  // In chunks: the hidden states, the inputs, and one chunk's logits with log-probabilities.
  const std::int64_t eval_output =
      chunk > 0 ? m * t * (4 * h + 16) + 8 * chunk * v + 12 : m * t * 8 * v;
  ledger.evaluation_peak_bytes = state + std::int64_t{shape.eval_windows} * t * 16 +
                                 std::max(eval_output, m * t * layer_forward);
  ledger.peak_bytes = std::max(update, ledger.evaluation_peak_bytes);
  ledger.reserved_peak_bytes = ledger.peak_bytes;
  return ledger;
}

int PaperModel::LargestMicrobatch(PaperShape shape, std::int64_t usable_bytes) const {
  const auto fits = [&](int microbatch) {
    shape.microbatch = microbatch;
    return Ledger(shape, usable_bytes, usable_bytes).peak_bytes <= usable_bytes;
  };
  if (!fits(1)) return 0;
  // The peak grows with the microbatch: double past the largest, then bisect.
  constexpr int kMost = 1 << 16;
  int low = 1, high = 2;
  while (high < kMost && fits(high)) low = high, high *= 2;
  if (high >= kMost && fits(kMost)) return kMost;
  while (high - low > 1) {
    const int middle = low + (high - low) / 2;
    (fits(middle) ? low : high) = middle;
  }
  return low;
}

}  // namespace trainerd
