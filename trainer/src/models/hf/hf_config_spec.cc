#include "models/hf/hf_config_spec.h"

#include <cmath>
#include <filesystem>

#include "trainerd/common/bounded_file.h"
#include "trainerd/common/json_input.h"

namespace trainerd {
namespace {

// A config.json is a few KB; one larger than this is not one.
constexpr std::size_t kMaxConfigBytes = 1 << 20;

// The decoder architectures and the model_type each is written with.
const std::vector<std::pair<std::string, std::string>> kArchitectures = {
    {"LlamaForCausalLM", "llama"},
    {"Qwen2ForCausalLM", "qwen2"},
    {"MistralForCausalLM", "mistral"},
    {"GPT2LMHeadModel", "gpt2"},
};

// Reads config.json's keys, each error naming the file, the key and what it holds.
class ConfigKeys {
 public:
  ConfigKeys(nlohmann::json json, std::string file)
      : json_(std::move(json)), file_(std::move(file)) {}

  const nlohmann::json& json() const { return json_; }
  bool Has(const std::string& key) const { return json_.contains(key) && !json_[key].is_null(); }

  Status Int(const std::string& key, int min, int* out) const {
    if (!Has(key)) return Missing(key, "an integer");
    const nlohmann::json& v = json_[key];
    if (!v.is_number_integer() || v.get<std::int64_t>() < min ||
        v.get<std::int64_t>() > (1 << 30)) {
      return Wrong(key, "an integer >= " + std::to_string(min), v);
    }
    *out = v.get<int>();
    return Status::Ok();
  }
  Status OptionalInt(const std::string& key, int min, int* out) const {
    return Has(key) ? Int(key, min, out) : Status::Ok();
  }
  Status Number(const nlohmann::json& object, const std::string& key, double* out) const {
    if (!object.contains(key) || object[key].is_null()) return Status::Ok();
    if (!object[key].is_number() || !std::isfinite(object[key].get<double>())) {
      return Wrong(key, "a finite number", object[key]);
    }
    *out = object[key].get<double>();
    return Status::Ok();
  }
  // A string under `key` of `object`, named `name` in errors (`key` when none is given);
  // `out` keeps its default when the key is absent. A null is refused: no key read so has a
  // meaning for it (transformers fails on a null activation too).
  Status String(const nlohmann::json& object, const std::string& key, std::string* out,
                const std::string& name = "") const {
    if (!object.contains(key)) return Status::Ok();
    if (!object[key].is_string()) return Wrong(name.empty() ? key : name, "a string", object[key]);
    *out = object[key].get<std::string>();
    return Status::Ok();
  }
  Status Bool(const std::string& key, bool* out) const {
    if (!Has(key)) return Status::Ok();
    if (!json_[key].is_boolean()) return Wrong(key, "true or false", json_[key]);
    *out = json_[key].get<bool>();
    return Status::Ok();
  }
  Status Missing(const std::string& key, const std::string& expected) const {
    return Status::InvalidArgument(file_ + ": " + key + ": expected " + expected + ", got nothing");
  }
  Status Wrong(const std::string& key, const std::string& expected,
               const nlohmann::json& got) const {
    return Status::InvalidArgument(file_ + ": " + key + ": expected " + expected + ", got " +
                                   got.dump());
  }

 private:
  nlohmann::json json_;
  std::string file_;
};

#define TRAINERD_RETURN_IF_ERROR(expr) \
  if (Status s = (expr); !s.ok()) return s

// The architecture and model_type: one of kArchitectures.
Status ReadArchitecture(const ConfigKeys& keys, HfDecoderConfig* config) {
  const nlohmann::json& json = keys.json();
  std::string supported;
  for (const auto& [name, type] : kArchitectures)
    supported += (supported.empty() ? "" : ", ") + name;
  if (!json.contains("architectures") || !json["architectures"].is_array() ||
      json["architectures"].size() != 1 || !json["architectures"][0].is_string()) {
    return keys.Wrong("architectures", "one architecture, of " + supported,
                      json.value("architectures", nlohmann::json()));
  }
  config->architecture = json["architectures"][0].get<std::string>();
  for (const auto& [name, type] : kArchitectures) {
    if (name != config->architecture) continue;
    config->model_type = type;
    TRAINERD_RETURN_IF_ERROR(keys.String(json, "model_type", &config->model_type));
    if (config->model_type != type) {
      return keys.Wrong("model_type", "\"" + type + "\" (" + name + ")", json["model_type"]);
    }
    return Status::Ok();
  }
  return keys.Wrong("architectures", "one of " + supported + " (trainerd trains those)",
                    json["architectures"]);
}

// rope_parameters (transformers 5) or rope_theta with rope_scaling (4.x).
Status ReadRope(const ConfigKeys& keys, HfDecoderConfig* config) {
  const nlohmann::json& json = keys.json();
  HfRope& rope = config->rope;
  rope.original_max_position_embeddings = config->max_position_embeddings;
  const char* scaling_key = keys.Has("rope_parameters") ? "rope_parameters" : "rope_scaling";
  nlohmann::json scaling = keys.Has(scaling_key) ? json[scaling_key] : nlohmann::json::object();
  if (!scaling.is_object()) return keys.Wrong(scaling_key, "an object", scaling);
  TRAINERD_RETURN_IF_ERROR(keys.Number(json, "rope_theta", &rope.theta));
  TRAINERD_RETURN_IF_ERROR(keys.Number(scaling, "rope_theta", &rope.theta));
  rope.type = "default";
  TRAINERD_RETURN_IF_ERROR(
      keys.String(scaling, "type", &rope.type, std::string(scaling_key) + ".type"));
  TRAINERD_RETURN_IF_ERROR(
      keys.String(scaling, "rope_type", &rope.type, std::string(scaling_key) + ".rope_type"));
  if (rope.type != "default" && rope.type != "llama3") {
    return keys.Wrong(std::string(scaling_key) + ".rope_type", "\"default\" or \"llama3\"",
                      rope.type);
  }
  if (rope.type == "llama3") {
    for (const char* key : {"factor", "low_freq_factor", "high_freq_factor"}) {
      if (!scaling.contains(key)) {
        return keys.Missing(std::string(scaling_key) + "." + key, "a number (rope_type llama3)");
      }
    }
    TRAINERD_RETURN_IF_ERROR(keys.Number(scaling, "factor", &rope.factor));
    TRAINERD_RETURN_IF_ERROR(keys.Number(scaling, "low_freq_factor", &rope.low_freq_factor));
    TRAINERD_RETURN_IF_ERROR(keys.Number(scaling, "high_freq_factor", &rope.high_freq_factor));
    double original = rope.original_max_position_embeddings;
    TRAINERD_RETURN_IF_ERROR(keys.Number(scaling, "original_max_position_embeddings", &original));
    if (!(original >= 1 && original <= (1 << 30))) {
      return keys.Wrong(std::string(scaling_key) + ".original_max_position_embeddings",
                        "a number of positions in [1, 2^30]", original);
    }
    rope.original_max_position_embeddings = static_cast<int>(original);
    if (!(rope.high_freq_factor > rope.low_freq_factor)) {
      return keys.Wrong(std::string(scaling_key) + ".high_freq_factor",
                        "a number above low_freq_factor", rope.high_freq_factor);
    }
  }
  if (!(rope.theta > 0)) return keys.Wrong("rope_theta", "a positive number", rope.theta);
  return Status::Ok();
}

// The attention window as transformers reads it: a config without the key gets its config
// class's default (MistralConfig's and Qwen2Config's sliding_window=4096), a null none (0).
Status ReadSlidingWindow(const ConfigKeys& keys, int* window) {
  constexpr int kTransformersDefaultWindow = 4096;
  *window = keys.json().contains("sliding_window") ? 0 : kTransformersDefaultWindow;
  return keys.OptionalInt("sliding_window", 1, window);
}

// Which of Qwen2's layers attend over the window, as Qwen2Config decides: config.json's
// layer_types ("sliding_attention" or "full_attention" per layer, as transformers 5 writes it)
// when present, else the layers from max_window_layers (default 28) on. REQUIRES:
// config->layer_windows holds a 0 per layer.
Status ReadQwen2WindowedLayers(const ConfigKeys& keys, HfDecoderConfig* config, int window) {
  const int layers = config->num_hidden_layers;
  if (keys.Has("layer_types")) {
    const nlohmann::json& types = keys.json()["layer_types"];
    const std::string expected = "a list of " + std::to_string(layers) +
                                 " (num_hidden_layers) of \"full_attention\" and "
                                 "\"sliding_attention\"";
    if (!types.is_array() || types.size() != static_cast<std::size_t>(layers)) {
      return keys.Wrong("layer_types", expected, types);
    }
    for (int i = 0; i < layers; ++i) {
      const nlohmann::json& type = types[static_cast<std::size_t>(i)];
      if (type != "full_attention" && type != "sliding_attention") {
        return keys.Wrong("layer_types", expected, types);
      }
      if (type == "sliding_attention") config->layer_windows[static_cast<std::size_t>(i)] = window;
    }
    return Status::Ok();
  }
  int first_windowed = 28;
  TRAINERD_RETURN_IF_ERROR(keys.OptionalInt("max_window_layers", 0, &first_windowed));
  for (int i = first_windowed; i < layers; ++i)
    config->layer_windows[static_cast<std::size_t>(i)] = window;
  return Status::Ok();
}

// Which projections carry biases and each layer's attention window, by architecture: Mistral's
// window is every layer's; Qwen2's (with use_sliding_window) its windowed layers'.
Status ReadArchitectureKeys(const ConfigKeys& keys, HfDecoderConfig* config) {
  const nlohmann::json& json = keys.json();
  config->layer_windows.assign(static_cast<std::size_t>(config->num_hidden_layers), 0);
  if (config->model_type == "qwen2") {
    config->qkv_bias = true;
    bool windowed = false;
    TRAINERD_RETURN_IF_ERROR(keys.Bool("use_sliding_window", &windowed));
    int window = 0;
    if (windowed) TRAINERD_RETURN_IF_ERROR(ReadSlidingWindow(keys, &window));
    if (window > 0) TRAINERD_RETURN_IF_ERROR(ReadQwen2WindowedLayers(keys, config, window));
  } else {
    bool attention_bias = false;
    TRAINERD_RETURN_IF_ERROR(keys.Bool("attention_bias", &attention_bias));
    config->qkv_bias = config->o_bias = attention_bias;
    TRAINERD_RETURN_IF_ERROR(keys.Bool("mlp_bias", &config->mlp_bias));
    if (config->model_type == "mistral") {
      int window = 0;
      TRAINERD_RETURN_IF_ERROR(ReadSlidingWindow(keys, &window));
      config->layer_windows.assign(config->layer_windows.size(), window);
    }
  }
  config->activation = "silu";
  TRAINERD_RETURN_IF_ERROR(keys.String(json, "hidden_act", &config->activation));
  if (config->activation != "silu") {
    return keys.Wrong("hidden_act", "\"silu\" (a SwiGLU MLP)", config->activation);
  }
  return Status::Ok();
}

// The embedding row the Llama family's models keep out of the gradient: transformers builds
// their nn.Embedding with padding_idx = pad_token_id, a negative id counting from the end.
Status ReadPadToken(const ConfigKeys& keys, HfDecoderConfig* config) {
  if (!keys.Has("pad_token_id")) return Status::Ok();  // absent or null: none
  const nlohmann::json& id = keys.json()["pad_token_id"];
  const int vocab = config->vocab_size;
  // Compared as a double: an unsigned id beyond int64 is out of range, not wrapped into it.
  if (!id.is_number_integer() || id.get<double>() < -vocab || id.get<double>() >= vocab) {
    return keys.Wrong(
        "pad_token_id",
        "a token id in [-vocab_size, vocab_size) (vocab_size " + std::to_string(vocab) + ")", id);
  }
  const int value = id.get<int>();
  config->pad_token_id = value < 0 ? value + vocab : value;
  return Status::Ok();
}

// The keys of the Llama family (Llama, Qwen2, Mistral).
Status ReadLlamaKeys(const ConfigKeys& keys, HfDecoderConfig* out) {
  HfDecoderConfig& config = *out;
  TRAINERD_RETURN_IF_ERROR(keys.Int("hidden_size", 1, &config.hidden_size));
  TRAINERD_RETURN_IF_ERROR(keys.Int("intermediate_size", 1, &config.intermediate_size));
  TRAINERD_RETURN_IF_ERROR(keys.Int("num_hidden_layers", 1, &config.num_hidden_layers));
  TRAINERD_RETURN_IF_ERROR(keys.Int("num_attention_heads", 1, &config.num_attention_heads));
  config.num_key_value_heads = config.num_attention_heads;
  TRAINERD_RETURN_IF_ERROR(keys.OptionalInt("num_key_value_heads", 1, &config.num_key_value_heads));
  if (config.num_attention_heads % config.num_key_value_heads != 0) {
    return keys.Wrong(
        "num_key_value_heads",
        "a divisor of num_attention_heads (" + std::to_string(config.num_attention_heads) + ")",
        config.num_key_value_heads);
  }
  config.head_dim = config.hidden_size / config.num_attention_heads;
  TRAINERD_RETURN_IF_ERROR(keys.OptionalInt("head_dim", 1, &config.head_dim));
  if (config.head_dim % 2 != 0)
    return keys.Wrong("head_dim", "an even number (rotary)", config.head_dim);
  TRAINERD_RETURN_IF_ERROR(keys.Int("max_position_embeddings", 1, &config.max_position_embeddings));
  TRAINERD_RETURN_IF_ERROR(keys.Number(keys.json(), "rms_norm_eps", &config.norm_eps));
  TRAINERD_RETURN_IF_ERROR(keys.Bool("tie_word_embeddings", &config.tie_word_embeddings));
  TRAINERD_RETURN_IF_ERROR(
      keys.Number(keys.json(), "attention_dropout", &config.attention_dropout));
  if (config.attention_dropout < 0 || config.attention_dropout >= 1) {
    return keys.Wrong("attention_dropout", "a probability in [0, 1)", config.attention_dropout);
  }
  TRAINERD_RETURN_IF_ERROR(ReadRope(keys, &config));
  TRAINERD_RETURN_IF_ERROR(ReadPadToken(keys, &config));
  TRAINERD_RETURN_IF_ERROR(ReadArchitectureKeys(keys, &config));
  return Status::Ok();
}

// The keys of GPT-2, by its own names (n_embd, n_layer, ...): LayerNorm, learned positions,
// a GELU MLP, the three dropouts; the variants that change the attention's arithmetic are
// refused.
Status ReadGpt2Keys(const ConfigKeys& keys, HfDecoderConfig* config) {
  const nlohmann::json& json = keys.json();
  TRAINERD_RETURN_IF_ERROR(keys.Int("n_embd", 1, &config->hidden_size));
  TRAINERD_RETURN_IF_ERROR(keys.Int("n_layer", 1, &config->num_hidden_layers));
  TRAINERD_RETURN_IF_ERROR(keys.Int("n_head", 1, &config->num_attention_heads));
  TRAINERD_RETURN_IF_ERROR(keys.Int("n_positions", 1, &config->max_position_embeddings));
  if (config->hidden_size % config->num_attention_heads != 0) {
    return keys.Wrong("n_head", "a divisor of n_embd (" + std::to_string(config->hidden_size) + ")",
                      config->num_attention_heads);
  }
  config->num_key_value_heads = config->num_attention_heads;
  config->head_dim = config->hidden_size / config->num_attention_heads;
  config->intermediate_size = 4 * config->hidden_size;
  TRAINERD_RETURN_IF_ERROR(keys.OptionalInt("n_inner", 1, &config->intermediate_size));
  config->norm_eps = 1e-5;
  TRAINERD_RETURN_IF_ERROR(keys.Number(json, "layer_norm_epsilon", &config->norm_eps));
  config->tie_word_embeddings = true;
  TRAINERD_RETURN_IF_ERROR(keys.Bool("tie_word_embeddings", &config->tie_word_embeddings));
  config->qkv_bias = config->o_bias = config->mlp_bias = true;
  config->attention_dropout = config->residual_dropout = config->embedding_dropout = 0.1;
  for (const auto& [key, value] : {std::pair{"attn_pdrop", &config->attention_dropout},
                                   std::pair{"resid_pdrop", &config->residual_dropout},
                                   std::pair{"embd_pdrop", &config->embedding_dropout}}) {
    TRAINERD_RETURN_IF_ERROR(keys.Number(json, key, value));
    if (*value < 0 || *value >= 1) return keys.Wrong(key, "a probability in [0, 1)", *value);
  }
  config->activation = "gelu_new";
  TRAINERD_RETURN_IF_ERROR(keys.String(json, "activation_function", &config->activation));
  if (config->activation != "gelu_new" && config->activation != "gelu_pytorch_tanh" &&
      config->activation != "gelu") {
    return keys.Wrong("activation_function", "\"gelu_new\", \"gelu_pytorch_tanh\" or \"gelu\"",
                      config->activation);
  }
  for (const auto& [key, supported] :
       {std::pair{"scale_attn_weights", true}, std::pair{"scale_attn_by_inverse_layer_idx", false},
        std::pair{"reorder_and_upcast_attn", false}, std::pair{"add_cross_attention", false}}) {
    bool value = supported;
    TRAINERD_RETURN_IF_ERROR(keys.Bool(key, &value));
    if (value != supported) {
      return keys.Wrong(key, std::string(supported ? "true" : "false") + " (trainerd trains that)",
                        value);
    }
  }
  return Status::Ok();
}

}  // namespace

std::vector<std::string> HfArchitectures() {
  std::vector<std::string> names;
  for (const auto& [name, type] : kArchitectures) names.push_back(name);
  return names;
}

Result<HfDecoderConfig> ReadHfConfig(const std::string& folder) {
  const std::string file = (std::filesystem::path(folder) / "config.json").string();
  std::error_code ec;
  if (!std::filesystem::is_directory(folder, ec)) {
    return Status::InvalidArgument(folder +
                                   ": not a folder (a Hugging Face model folder as "
                                   "save_pretrained writes it: config.json and "
                                   "model.safetensors)");
  }
  Result<std::string> text = ReadBoundedFile(file, kMaxConfigBytes);
  if (!text.ok() && text.status().code() == Status::Code::kNotFound) {
    return Status::InvalidArgument(file +
                                   ": missing: a Hugging Face model folder has "
                                   "config.json beside its weights");
  }
  if (!text.ok()) return Status::InvalidArgument(text.status().message());
  nlohmann::json json = ParseBoundedJson(*text);
  if (!json.is_object()) {
    return Status::InvalidArgument(file + ": not a JSON object (nested at most " +
                                   std::to_string(kMaxJsonDepth) + " levels)");
  }
  const ConfigKeys keys(std::move(json), file);
  HfDecoderConfig config;
  TRAINERD_RETURN_IF_ERROR(ReadArchitecture(keys, &config));
  TRAINERD_RETURN_IF_ERROR(keys.Int("vocab_size", 1, &config.vocab_size));
  TRAINERD_RETURN_IF_ERROR(config.model_type == "gpt2" ? ReadGpt2Keys(keys, &config)
                                                       : ReadLlamaKeys(keys, &config));
  return config;
}

}  // namespace trainerd
