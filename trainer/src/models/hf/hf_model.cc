#include "models/hf/hf_model.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "models/hf/gpt2.h"
#include "models/hf/hf_spec.h"
#include "models/hf/hf_weights.h"
#include "models/hf/llama_family.h"
#include "trainerd/common/atomic_file.h"
#include "trainerd/common/bounded_file.h"
#include "trainerd/common/json_input.h"
#include "trainerd/common/proc_file.h"
#include "trainerd/trainer/models/model_registry.h"

namespace trainerd {
namespace {

// What a release carries from the folder besides config.json: generation settings and the
// tokenizer, in any of the forms transformers saves it.
constexpr const char* kCarriedFiles[] = {"generation_config.json",
                                         "tokenizer.json",
                                         "tokenizer_config.json",
                                         "special_tokens_map.json",
                                         "tokenizer.model",
                                         "vocab.json",
                                         "merges.txt",
                                         "added_tokens.json",
                                         "chat_template.jinja",
                                         "chat_template.json"};
// A tokenizer.json of a 256k vocabulary is ~35 MB: a carried file larger than this is not one.
constexpr std::size_t kMaxCarriedBytes = 256 << 20;

}  // namespace

HfModel::HfModel(const HfDecoderConfig& config, int block_size, std::string folder)
    : config_(config), block_size_(block_size), folder_(std::move(folder)) {}

std::vector<std::string> HfModel::IgnoredWeights() const {
  if (config_.tie_word_embeddings) return {"lm_head.weight"};
  return {};
}

FlopsPerSample HfModel::Flops(double not_multiplying, const std::string& what) const {
  const HfDecoderConfig& c = config_;
  const double embedding = static_cast<double>(c.vocab_size) * c.hidden_size;
  const double multiplying = static_cast<double>(CountParameters(*this)) - not_multiplying -
                             (c.tie_word_embeddings ? 0 : embedding);
  const double per_token = 6.0 * multiplying + 12.0 * c.num_hidden_layers *
                                                   static_cast<double>(block_size_) *
                                                   c.num_attention_heads * c.head_dim;
  return FlopsPerSample{per_token * static_cast<double>(block_size_),
                        "formula: (6 x parameters less the input embedding when untied" + what +
                            " + 12 x layers x block_size x heads x head_dim) per token"};
}

torch::Tensor HfModel::forward(const torch::Tensor& tokens) { return OutputLogits(Hidden(tokens)); }

torch::Tensor HfModel::OutputLogits(const torch::Tensor& hidden) {
  torch::nn::Linear head = lm_head();
  return head ? head->forward(hidden)
              : torch::matmul(hidden, input_embedding().t().to(hidden.scalar_type()));
}

std::vector<torch::Tensor> HfModel::output_layer_parameters() const {
  const torch::nn::Linear head = lm_head();
  return head ? head->parameters() : std::vector<torch::Tensor>{input_embedding()};
}

Status HfModel::KeepCarriedFiles() {
  namespace fs = std::filesystem;
  const std::string source = (fs::path(folder_) / "config.json").string();
  Result<std::string> text = ReadBoundedFile(source, kMaxCarriedBytes);
  if (!text.ok()) return text.status();
  config_json_ = ParseBoundedJson(*text);
  if (!config_json_.is_object()) return Status::InvalidArgument(source + ": not a JSON object");
  carried_.clear();
  for (const char* name : kCarriedFiles) {
    const std::string path = (fs::path(folder_) / name).string();
    Result<std::string> bytes = ReadBoundedFile(path, kMaxCarriedBytes);
    if (!bytes.ok() && bytes.status().code() == Status::Code::kNotFound) continue;
    if (!bytes.ok()) return bytes.status();
    carried_.emplace_back(name, std::move(bytes).value());
  }
  return Status::Ok();
}

Result<std::vector<std::string>> HfModel::WriteCompanionFiles(const std::string& dir) const {
  namespace fs = std::filesystem;
  nlohmann::json config = config_json_;
  // transformers 5 reads the weights' dtype from "dtype", 4.x from "torch_dtype": both are
  // written, so that neither version reads a dtype the release's weights do not have.
  config["dtype"] = config["torch_dtype"] = "float32";
  if (Status s =
          WriteFileAtomically((fs::path(dir) / "config.json").string(), config.dump(2) + "\n");
      !s.ok()) {
    return s;
  }
  std::vector<std::string> written = {"config.json"};
  for (const auto& [name, bytes] : carried_) {
    if (Status s = WriteFileAtomically((fs::path(dir) / name).string(), bytes); !s.ok()) return s;
    written.push_back(name);
  }
  return written;
}

namespace {

// The bytes of the model's fp32 weights as config.json describes it, in double (a crafted
// config's sizes overflow 64 bits): the embedding (twice when untied) and each layer's
// attention projections and MLP; norms and biases left out, so never more than the truth.
double WeightBytes(const HfDecoderConfig& c) {
  const double h = c.hidden_size;
  const double embedding = static_cast<double>(c.vocab_size) * h * (c.tie_word_embeddings ? 1 : 2);
  const double attention =
      2 * h * c.num_attention_heads * c.head_dim + 2 * h * c.num_key_value_heads * c.head_dim;
  const double mlp = (c.model_type == "gpt2" ? 2 : 3) * h * c.intermediate_size;
  return 4 * (embedding + static_cast<double>(c.num_hidden_layers) * (attention + mlp));
}

// The architecture config.json names, its weights loaded from the folder.
TRAINERD_REGISTER_MODEL("hf", [](const ModelContext& context) {
  const HfKeys keys = context.options.get<HfKeys>();
  const HfDecoderConfig& config = keys.config;
  if (context.block_size > config.max_position_embeddings && config.model_type == "gpt2") {
    throw ModelLoadError(
        keys.path + "/config.json: n_positions: " + std::to_string(config.max_position_embeddings) +
        " learned positions, fewer than model.block_size (" + std::to_string(context.block_size) +
        ")");
  }
  // Refused before anything is allocated: weights this host cannot hold would end the worker
  // in the kernel's OOM kill, or in an allocation error naming no file.
  const double weight_bytes = WeightBytes(config);
  const std::int64_t available = HostAvailableBytes();
  if (available > 0 && weight_bytes > static_cast<double>(available)) {
    throw ModelLoadError(keys.path + "/config.json: its model's fp32 weights alone take " +
                         std::to_string(static_cast<long long>(weight_bytes / (1 << 30))) +
                         " GiB or more, and this host has " + std::to_string(available >> 30) +
                         " GiB available (MemAvailable): a smaller model, or a larger host");
  }
  std::shared_ptr<HfModel> model;
  if (config.model_type == "gpt2") {
    model = std::make_shared<Gpt2Lm>(config, context.block_size, keys.path);
  } else {
    model = std::make_shared<LlamaFamilyLm>(config, context.block_size, keys.path);
  }
  if (Status s = model->KeepCarriedFiles(); !s.ok()) throw ModelLoadError(s.message());
  Result<HfWeights> weights = HfWeights::Open(keys.path);
  if (!weights.ok()) throw ModelLoadError(weights.status().message());
  if (Status s = weights->LoadInto(*model, model->IgnoredWeights(), model->OptionalPrefix());
      !s.ok()) {
    throw ModelLoadError(s.message());
  }
  return model;
});

}  // namespace
}  // namespace trainerd
