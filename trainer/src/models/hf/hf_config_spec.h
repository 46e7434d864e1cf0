// A Hugging Face causal-LM folder's config.json, as the decoder architectures trainerd trains
// read it (LlamaForCausalLM, Qwen2ForCausalLM, MistralForCausalLM, GPT2LMHeadModel): every
// hyper-parameter the model needs, by Llama's names (GPT-2's n_embd is hidden_size, ...), with the
// defaults `transformers` gives a key a config leaves out. Both the layout `transformers` 4.x
// writes (rope_theta, rope_scaling) and 5.x's (rope_parameters) are read. Torch-free: the job spec
// reads it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "trainerd/common/status.h"

namespace trainerd {

// Rotary position embedding: inverse frequencies theta^(-2i/d), rescaled as Llama 3.1 does
// when type is "llama3".
struct HfRope {
  std::string type = "default";  // "default" or "llama3"
  double theta = 10000.0;
  double factor = 8.0;  // llama3 only, as the next three
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int original_max_position_embeddings = 8192;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(HfRope, type, theta, factor, low_freq_factor,
                                                high_freq_factor, original_max_position_embeddings)

struct HfDecoderConfig {
  std::string architecture;  // config.json's architectures[0]
  std::string model_type;
  int vocab_size = 0;
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_hidden_layers = 0;
  int num_attention_heads = 0;
  int num_key_value_heads = 0;  // grouped-query attention when below num_attention_heads
  int head_dim = 0;
  int max_position_embeddings = 0;
  double norm_eps = 1e-6;  // rms_norm_eps; GPT-2's layer_norm_epsilon
  HfRope rope;
  bool tie_word_embeddings = false;
  bool qkv_bias = false;  // q_proj, k_proj, v_proj (Llama's attention_bias; always for Qwen2)
  bool o_bias = false;    // o_proj (Llama's attention_bias)
  bool mlp_bias = false;
  double attention_dropout = 0.0;   // GPT-2's attn_pdrop
  double residual_dropout = 0.0;    // GPT-2's resid_pdrop (attention output and MLP)
  double embedding_dropout = 0.0;   // GPT-2's embd_pdrop
  std::string activation = "silu";  // hidden_act; GPT-2's activation_function
  // Each decoder layer's attention window: a query sees only the last this many positions
  // (itself included); 0: none. Mistral's sliding_window, Qwen2's on its windowed layers.
  std::vector<int> layer_windows;
  // The Llama family's embedding row that takes no gradient (pad_token_id, as nn.Embedding's
  // padding_idx: a negative id counted from the end); -1: none. GPT-2 has none.
  int pad_token_id = -1;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(
    HfDecoderConfig, architecture, model_type, vocab_size, hidden_size, intermediate_size,
    num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim, max_position_embeddings,
    norm_eps, rope, tie_word_embeddings, qkv_bias, o_bias, mlp_bias, attention_dropout,
    residual_dropout, embedding_dropout, activation, layer_windows, pad_token_id)

// The architectures config.json's `architectures` may name.
std::vector<std::string> HfArchitectures();

// Reads `folder`/config.json. Errors name the file, the key and the value: a folder without
// it, JSON that does not parse, an architecture not supported (listing those that are), a
// key of the wrong type or out of range, an activation other than silu.
Result<HfDecoderConfig> ReadHfConfig(const std::string& folder);

}  // namespace trainerd
