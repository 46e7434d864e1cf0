// The keys of the built-in GPT (model.kind: gpt, the default): its shape, dropout and kernels.
// Torch-free: the job spec reads them.
#pragma once

#include <nlohmann/json.hpp>

#include "trainerd/trainer/spec/job_spec.h"

namespace trainerd {

// How the GPT computes attention and dropout on CPU tensors: kFused with the trainer's own
// kernels (blockwise_attention.h, dropout masks regenerated from counters in
// sample_dropout.h); kExplicit with LibTorch's ops, keeping what they keep
// (model.kernels: explicit).
enum class GptKernels { kFused, kExplicit };
inline constexpr EnumNames<GptKernels, 2> kGptKernelsNames{{{
    {GptKernels::kFused, "fused"},
    {GptKernels::kExplicit, "explicit"},
}}};
TRAINERD_JSON_ENUM(GptKernels, kGptKernelsNames)

struct GptOptions {
  int n_layer = 4;       // decoder blocks
  int n_head = 4;        // attention heads; must divide n_embd
  int n_embd = 128;      // model width
  int block_size = 128;  // context length in tokens: model.block_size, not one of the options
  int vocab_size = 256;  // token ids [0, vocab_size): 256 for bytes; tokens data may need more
  double dropout = 0.0;  // probability, [0, 1)
  bool bias = true;      // biases in Linear and LayerNorm layers
  GptKernels kernels = GptKernels::kFused;
};
// Every option but block_size, which the job gives as model.block_size to every kind.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(GptOptions, n_layer, n_head, n_embd, vocab_size,
                                                dropout, bias, kernels)

// The model: section of a GPT of `options`, as the parser would read it: jobs built in code
// (tests, benchmarks) start from it.
ModelSpec GptModelSpec(const GptOptions& options);
// The options of a GPT's model: section, block_size included. REQUIRES: spec.kind is gpt.
GptOptions GptOptionsOf(const ModelSpec& spec);

}  // namespace trainerd
