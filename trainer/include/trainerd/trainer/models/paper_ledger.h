// The memory ledger of a Hugging Face causal LM at a size no machine here holds, on paper:
// from config.json alone, by per-architecture formulas whose coefficients were fitted to the
// ledgers trainer-run measures (plan/memory_ledger.h) for small models of each family, at fp32
// and bf16, under LibTorch 1.13 and 2.11 (docs/hugging-face.md, "Sizes no machine here can
// hold"). trainer-run --what-if --model DIR prints it. Torch-free.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "trainerd/common/status.h"
#include "trainerd/trainer/spec/job_spec.h"
#include "trainerd/trainer/spec/worker_protocol.h"

namespace trainerd {

// The LibTorch whose autograd the formulas describe: what a layer keeps for its backward differs
// between the versions (1.x keeps two more hidden-wide tensors per Llama layer), not between
// the attention kernels (the blockwise one, which draws attention dropout, keeps what 2.x's
// scaled_dot_product_attention keeps).
enum class PaperLibTorch { k1, k2 };

struct PaperShape {
  int block_size = 0;
  int microbatch = 1;
  int accumulation_steps = 1;
  Precision precision = Precision::kFp32;
  bool checkpoint_all = false;  // every layer checkpointed, or none
  // kHost: AdamW's state, the fp32 master weights and a copy of the gradients in the ledger's
  // `host` part (its budget 0: unknown), none of the optimizer state on the device.
  StatePlacement optimizer_state = StatePlacement::kDevice;
  // ZeRO over `ranks` data-parallel ranks (PlanSpec::zero_stage, with the state on the
  // device): the ledger of the rank with the largest shard, the parameters taken as split
  // evenly (the trainer splits them by whole tensors, state_sharding.h).
  int zero_stage = 0;
  int ranks = 1;
  // finetune: {method: lora}: the model's own parameters frozen (no gradients, no optimizer
  // state), adapters of adapters->rank on the layers adapters->targets names trained; their
  // input after dropout (where dropout > 0) and their rank-wide product kept as activations;
  // with adapters->base_dtype bf16, the linear layers' weights in 2 bytes and never cast.
  // REQUIRES: AdapterParameters(*adapters) is ok.
  std::optional<FinetuneSpec> adapters = std::nullopt;
  // plan.output_chunk: the output layer's loss in chunks of this many positions, each
  // recomputed in the backward (semantics/output_chunks.h); 0: the whole logits at once.
  int output_chunk = 0;
  // plan.step_in_backward: no gradients kept (a parameter's lives from its accumulation to its
  // step, among the temporaries). REQUIRES: accumulation_steps 1, the state on the device.
  bool step_in_backward = false;
  // plan.offload_activations: the layers (none checkpointed) keep what they save for the
  // backward in host memory (the ledger's `host` part, its budget 0: unknown), none of it on
  // the device. Ignored with checkpoint_all.
  bool offload_activations = false;
  int eval_windows = 16;  // data.eval_windows_per_slice: the held-out batch
  PaperLibTorch libtorch = PaperLibTorch::k2;
};

class PaperModel {
 public:
  // `folder`/config.json, with the errors of the hf model kind (naming the file, key, value).
  static Result<PaperModel> Read(const std::string& folder);

  const std::string& architecture() const { return architecture_; }
  std::int64_t parameters() const;
  int max_positions() const { return max_positions_; }

  // The ledger at `shape` (AdamW; fp32 master weights, as trainer-run trains), against a
  // device of `budget_bytes` of which `usable_bytes` may be used. Every layer is a block.
  MemoryLedger Ledger(const PaperShape& shape, std::int64_t budget_bytes,
                      std::int64_t usable_bytes) const;
  // The largest microbatch whose peak fits `usable_bytes` at `shape` (its microbatch
  // ignored); 0 when not even one sample fits.
  int LargestMicrobatch(PaperShape shape, std::int64_t usable_bytes) const;

  // The parameters of `adapters` on every layer; InvalidArgument naming the target that names
  // no linear layer of the architecture, and those it has.
  Result<std::int64_t> AdapterParameters(const FinetuneSpec& adapters) const;
  // What peft adapts in this family by default: q_proj and v_proj, GPT-2's c_attn.
  std::vector<std::string> DefaultAdapterTargets() const;

 private:
  struct LinearLayer {
    std::string path;  // within a decoder layer ("self_attn.q_proj")
    std::int64_t in, out;
  };
  std::vector<LinearLayer> LayerLinears() const;
  // Elements and input widths of the adapters on one layer (the layers they name).
  struct LayerAdapters {
    std::int64_t parameters = 0, inputs = 0, layers = 0;
  };
  LayerAdapters AdaptersOfLayer(const FinetuneSpec& adapters) const;
  // Weights of the layer's matrix products (with GPT-2's biases: autocast casts those too).
  std::int64_t LinearParameters() const;
  std::int64_t LayerParameters() const;

  std::string architecture_;
  bool gpt2_ = false;
  std::int64_t vocab_ = 0, hidden_ = 0, intermediate_ = 0, layers_ = 0;
  std::int64_t heads_ = 0, kv_heads_ = 0, head_dim_ = 0;
  int max_positions_ = 0;
  bool tied_ = false, qkv_bias_ = false, o_bias_ = false, mlp_bias_ = false;
  bool attention_dropout_ = false;
};

}  // namespace trainerd
