// libFuzzer harness for the JSON files of a Hugging Face folder the team drops in: the bytes
// before the first NUL are config.json (ReadHfConfig), those after it, when there is a NUL,
// model.safetensors.index.json (ReadHfIndex), written to a folder and read as the worker
// and the daemon read them. Nothing may throw, crash or hit undefined behaviour; an accepted
// config holds what the model builders rely on (positive sizes, an even head dimension,
// query heads a multiple of key/value heads, a finite positive rope theta), and every shard
// an accepted index names is a file of the folder itself. Seeds: corpus/hf_folder/.
#include <unistd.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "models/hf/hf_config_spec.h"
#include "models/hf/hf_index_spec.h"

namespace {

std::string* folder = nullptr;

void RemoveFolder() {
  std::error_code ignored;
  if (folder != nullptr) std::filesystem::remove_all(*folder, ignored);
}

void Write(const std::string& path, std::string_view bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), bytes.size());
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  // tmpfs when there is one: every input is written twice.
  const std::filesystem::path base = std::filesystem::is_directory("/dev/shm")
                                         ? "/dev/shm"
                                         : std::filesystem::temp_directory_path();
  std::string pattern = (base / "trainerd-fuzz-hf-XXXXXX").string();
  trainerd::fuzz::Expect(::mkdtemp(pattern.data()) != nullptr, "mkdtemp");
  folder = new std::string(pattern);
  std::atexit(RemoveFolder);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using trainerd::fuzz::Expect;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::size_t split = input.find('\0');
  Write(*folder + "/config.json", input.substr(0, split));
  const trainerd::Result<trainerd::HfDecoderConfig> config = trainerd::ReadHfConfig(*folder);
  if (config.ok()) {
    const trainerd::HfDecoderConfig& c = *config;
    Expect(c.hidden_size >= 1 && c.vocab_size >= 1 && c.num_hidden_layers >= 1 &&
               c.intermediate_size >= 1 && c.max_position_embeddings >= 1,
           "a config accepted with a size below 1");
    Expect(c.num_attention_heads >= 1 && c.num_key_value_heads >= 1 &&
               c.num_attention_heads % c.num_key_value_heads == 0,
           "query heads not a multiple of key/value heads");
    Expect(c.head_dim >= 1 && (c.model_type == "gpt2" || c.head_dim % 2 == 0),
           "a rotary head dimension that is not even");
    Expect(std::isfinite(c.rope.theta) && c.rope.theta > 0, "rope theta not finite and positive");
    Expect(c.rope.original_max_position_embeddings >= 1, "rope positions below 1");
  } else {
    Expect(config.status().message().find("config.json") != std::string::npos ||
               config.status().message().find(*folder) != std::string::npos,
           "an error that names no file: " + config.status().message());
  }
  if (split == std::string_view::npos) return 0;
  const std::string index = *folder + "/model.safetensors.index.json";
  Write(index, input.substr(split + 1));
  const auto shards = trainerd::ReadHfIndex(index);
  if (!shards.ok()) {
    Expect(shards.status().message().rfind(index, 0) == 0,
           "an index error that does not start with its file: " + shards.status().message());
    return 0;
  }
  for (const auto& [shard, tensors] : *shards) {
    Expect(!shard.empty() && shard != "." && shard != ".." && shard.find('/') == std::string::npos,
           "a shard outside the folder accepted: " + shard);
    Expect(!tensors.empty(), "a shard without tensors");
  }
  return 0;
}
