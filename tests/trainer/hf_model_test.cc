// Hugging Face causal-LM folders (model.kind: hf) against the reference implementation: for
// folders the real `transformers` made (tests/trainer/hf/make_hf_models.py, the hf_models
// fixture), trainerd's model gives transformers' logits within 1e-5 and, for one backward
// of the mean next-token cross-entropy, its gradients within 1e-5 relative, for every
// variant (grouped-query and multi-head attention, tied and untied heads, attention and MLP
// biases, Qwen2's q/k/v biases, Llama 3.1's rope scaling, a 4.x config, sharded weights,
// GPT-2 by its own and by the Hub's names); a trained folder loads in transformers, and an
// adapter job's release in peft on the base folder, each with trainerd's logits within 1e-5;
// weight decay shrinks the parameters the transformers Trainer decays; bad folders are
// errors naming the file and the key or tensor.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <torch/torch.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "../support/child_process.h"
#include "../support/temp_dir.h"
#include "data/tokens/tokens_spec.h"
#include "loop/safetensors_writer.h"
#include "models/hf/hf_config_spec.h"
#include "trainerd/trainer/data/array_tensor.h"
#include "trainerd/trainer/data/mapped_file.h"
#include "trainerd/trainer/device/weight_decay.h"
#include "trainerd/trainer/models/build_model.h"
#include "trainerd/trainer/plan/parity.h"
#include "trainerd/trainer/semantics/document_positions.h"
#include "trainerd/trainer/semantics/loss.h"
#include "trainerd/trainer/spec/data_format.h"
#include "trainerd/trainer/spec/job_spec_parser.h"
#include "trainerd/trainer/spec/model_kind.h"

namespace trainerd {
namespace {

namespace fs = std::filesystem;

const std::string kModels = TRAINERD_TEST_HF_MODELS;

// The tensors of a .safetensors file, copied out of the mapping.
std::map<std::string, torch::Tensor> ReadTensors(const std::string& path) {
  Result<MappedFile> file = MappedFile::Open(path, false);
  EXPECT_TRUE(file.ok()) << file.status().message();
  std::map<std::string, torch::Tensor> tensors;
  if (!file.ok()) return tensors;
  Result<std::map<std::string, ArrayView>> arrays =
      ReadSafetensorsHeader(file->data(), file->size(), path);
  EXPECT_TRUE(arrays.ok()) << arrays.status().message();
  for (const auto& [name, array] : *arrays) tensors[name] = MappedTensor(*file, array).clone();
  return tensors;
}

// A job training the folder: its model section is what this test builds.
Result<JobSpec> JobFor(const std::string& folder) {
  return ParseJobSpecText("model: {kind: hf, path: " + folder +
                              ", block_size: 24}\n"
                              "data: {files: [/usr/share/common-licenses/GPL-3]}\n",
                          "hf-job.yaml");
}

std::shared_ptr<TrainableModel> Build(const std::string& folder) {
  Result<JobSpec> spec = JobFor(folder);
  EXPECT_TRUE(spec.ok()) << spec.status().message();
  return spec.ok() ? BuildModel(spec->model, 0, "hf-job.yaml") : nullptr;
}

// The message a folder's job or model fails with ("" when both succeed).
std::string ErrorOf(const std::string& folder) {
  Result<JobSpec> spec = JobFor(folder);
  if (!spec.ok()) return spec.status().message();
  try {
    BuildModel(spec->model, 0, "hf-job.yaml");
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// The logits a script of hf/ wrote when run with `args`, whose last one is its output file.
torch::Tensor PythonLogits(const std::vector<std::string>& args) {
  testing::ChildProcess python(args);
  python.ReadAllLines();
  const int code = python.ExitCode();
  EXPECT_EQ(code, 0) << python.ReadAllStderr();
  return code == 0 ? ReadTensors(args.back()).at("logits") : torch::Tensor();
}

// Random ids below 96, written to `ids_path` as input_ids for the Python side, and the logits
// the model of `folder` computes for them in evaluation mode (undefined where it is not built).
struct IdsAndLogits {
  torch::Tensor ids, logits;
};
IdsAndLogits LogitsOf(const std::string& folder, const std::string& ids_path) {
  std::shared_ptr<TrainableModel> model = Build(folder);
  EXPECT_NE(model, nullptr) << folder;
  if (model == nullptr) return {};
  model->eval();
  torch::Tensor ids = torch::randint(0, 96, {2, 24}, torch::kLong);
  EXPECT_TRUE(WriteSafetensors(ids_path, {{"input_ids", ids}}, {}).ok());
  return {ids, model->forward(ids).detach()};
}

void ExpectSameLogits(const torch::Tensor& got, const torch::Tensor& want) {
  ASSERT_TRUE(want.defined());
  EXPECT_LE((got - want).abs().max().item<double>(),
            1e-5 * std::max(1.0, want.abs().max().item<double>()));
}

// trainer-run's events for 6 updates of `folder` on token ids below 96, released into
// dir/out; `finetune` is the job's finetune: section, or ""; `flags` go to trainer-run too.
std::vector<std::string> TrainFolder(const testing::TempDir& dir, const std::string& folder,
                                     const std::string& finetune,
                                     const std::vector<std::string>& flags = {}) {
  torch::Tensor tokens = torch::arange(0, 96, 3, torch::kShort).repeat({300});
  std::ofstream(dir.File("train.bin"), std::ios::binary)
      .write(static_cast<const char*>(tokens.data_ptr()), tokens.nbytes());
  std::ofstream(dir.File("val.bin"), std::ios::binary)
      .write(static_cast<const char*>(tokens.data_ptr()), 2000);
  const std::string job = dir.Write(
      "job.yaml", "model: {kind: hf, path: " + folder + ", block_size: 24}\n" + finetune +
                      "data: {format: tokens, train: train.bin, eval: [val.bin]}\n"
                      "optimizer: {lr: 0.01}\n"
                      "training: {effective_batch: 4, updates: 6, seed: 3, eval_interval: 6, "
                      "checkpoint_interval: 6}\n"
                      "runtime: {threads: 1}\n");
  std::vector<std::string> args = {TRAINER_RUN_PATH, "--config",      job,
                                   "--output-dir",   dir.File("out"), "--json"};
  args.insert(args.end(), flags.begin(), flags.end());
  testing::ChildProcess run(args);
  std::vector<std::string> events = run.ReadAllLines();
  EXPECT_EQ(run.ExitCode(), 0) << run.ReadAllStderr();
  return events;
}

class HfReferenceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(HfReferenceTest, LogitsAndGradientsEqualTransformers) {
  torch::set_num_threads(1);
  const std::string folder = kModels + "/" + GetParam();
  std::map<std::string, torch::Tensor> reference =
      ReadTensors(kModels + "/" + GetParam() + ".reference.safetensors");
  std::shared_ptr<TrainableModel> model = Build(folder);
  ASSERT_NE(model, nullptr);
  model->eval();
  const torch::Tensor ids = reference.at("input_ids");
  const torch::Tensor logits = model->forward(ids);
  const torch::Tensor want = reference.at("logits");
  ASSERT_EQ(logits.sizes(), want.sizes());
  const double scale = std::max(1.0, want.abs().max().item<double>());
  EXPECT_LE((logits - want).abs().max().item<double>(), 1e-5 * scale) << GetParam();

  const std::int64_t vocab = logits.size(-1);
  const torch::Tensor loss = torch::nn::functional::cross_entropy(
      logits.narrow(1, 0, ids.size(1) - 1).reshape({-1, vocab}),
      ids.narrow(1, 1, ids.size(1) - 1).reshape({-1}));
  EXPECT_NEAR(loss.item<double>(), reference.at("loss").item<double>(),
              1e-6 * reference.at("loss").item<double>());
  loss.backward();
  int compared = 0;
  for (const auto& item : model->named_parameters()) {
    const auto found = reference.find("grad." + item.key());
    ASSERT_NE(found, reference.end()) << "transformers has no parameter " << item.key();
    const torch::Tensor& g = item.value().grad();
    ASSERT_TRUE(g.defined()) << item.key();
    const double norm = found->second.norm().item<double>();
    EXPECT_LE((g - found->second).norm().item<double>(), 1e-5 * std::max(norm, 1e-12))
        << GetParam() << ": " << item.key();
    ++compared;
  }
  EXPECT_EQ(compared, static_cast<int>(std::count_if(
                          reference.begin(), reference.end(),
                          [](const auto& entry) { return entry.first.starts_with("grad."); })))
      << "every parameter of transformers' model has one here";
}

INSTANTIATE_TEST_SUITE_P(Variants, HfReferenceTest,
                         ::testing::Values("llama_gqa", "llama_tied_llama3_bias", "llama_v4_config",
                                           "qwen2", "mistral", "mistral_window", "qwen2_window",
                                           "llama_sharded", "gpt2", "gpt2_hub_names",
                                           "llama_wide_vocab", "qwen2_wide_vocab"));

// Packed documents (semantics/document_positions.h): transformers' logits of the ids under
// restarting position_ids (its block-diagonal mask), and each document's logits alone, the two
// rows packed differently: its rotary or learned positions from 0 and its attention within
// itself, under a sliding window too (mistral_window's 5 and qwen2_window's 6 positions, below
// documents of 9, 11 and 15 ids).
class HfPackedDocumentsTest : public ::testing::TestWithParam<std::string> {};

TEST_P(HfPackedDocumentsTest, APackedWindowGivesTransformersLogitsAndEachDocumentItsOwn) {
  torch::set_num_threads(1);
  std::shared_ptr<TrainableModel> model = Build(kModels + "/" + GetParam());
  ASSERT_NE(model, nullptr);
  model->eval();
  torch::NoGradGuard no_grad;
  std::map<std::string, torch::Tensor> reference =
      ReadTensors(kModels + "/" + GetParam() + ".reference.safetensors");
  const torch::Tensor ids = reference.at("input_ids");
  const torch::Tensor positions = reference.at("packed_position_ids");
  ASSERT_EQ(positions.sizes(), ids.sizes());
  torch::Tensor packed;
  {
    const DocumentPositionsScope documents(positions);
    packed = model->forward(ids);
  }
  const torch::Tensor want = reference.at("packed_logits");
  EXPECT_LE((packed - want).abs().max().item<double>(),
            1e-5 * std::max(1.0, want.abs().max().item<double>()))
      << GetParam();
  const torch::Tensor unaware = model->forward(ids);
  const std::vector<std::vector<std::int64_t>> lengths = {{9, 4, 11}, {15, 9}};  // the script's
  for (std::int64_t b = 0; b < ids.size(0); ++b) {
    std::int64_t start = 0;
    for (const std::int64_t length : lengths[static_cast<std::size_t>(b)]) {
      const torch::Tensor alone = model->forward(ids[b].narrow(0, start, length).unsqueeze(0))[0];
      const double scale = std::max(1.0, alone.abs().max().item<double>());
      EXPECT_LE((packed[b].narrow(0, start, length) - alone).abs().max().item<double>(),
                1e-5 * scale)
          << GetParam() << ": row " << b << ", the document at " << start;
      if (start > 0) {
        EXPECT_GT((unaware[b].narrow(0, start, length) - alone).abs().max().item<double>(), 1e-3)
            << GetParam() << ": row " << b << ", without its positions the document at " << start
            << " sees the one before";
      }
      start += length;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, HfPackedDocumentsTest,
                         ::testing::Values("llama_gqa", "llama_tied_llama3_bias", "qwen2",
                                           "mistral_window", "qwen2_window", "gpt2"));

// The output layer in chunks of 5 positions (plan output_chunk): transformers' loss and
// gradients, with the head untied (llama_gqa) and tied (the others).
class HfChunkedOutputTest : public ::testing::TestWithParam<std::string> {};

TEST_P(HfChunkedOutputTest, TheLossAndGradientsInChunksEqualTransformers) {
  torch::set_num_threads(1);
  std::map<std::string, torch::Tensor> reference =
      ReadTensors(kModels + "/" + GetParam() + ".reference.safetensors");
  std::shared_ptr<TrainableModel> model = Build(kModels + "/" + GetParam());
  ASSERT_NE(model, nullptr);
  ASSERT_FALSE(model->output_layer_parameters().empty());
  model->eval();
  model->set_output_chunk(5);
  const torch::Tensor ids = reference.at("input_ids");
  const std::int64_t t = ids.size(1) - 1;
  Batch window;
  window.inputs = ids.narrow(1, 0, t);
  window.targets = ids.narrow(1, 1, t);
  const LossTerms terms = model->ForwardLoss(window);
  const torch::Tensor loss = terms.sum / static_cast<double>(terms.count);
  EXPECT_NEAR(loss.item<double>(), reference.at("loss").item<double>(),
              1e-6 * reference.at("loss").item<double>());
  loss.backward();
  for (const auto& item : model->named_parameters()) {
    const torch::Tensor& want = reference.at("grad." + item.key());
    const torch::Tensor& g = item.value().grad();
    ASSERT_TRUE(g.defined()) << item.key();
    EXPECT_LE((g - want).norm().item<double>(), 1e-5 * std::max(want.norm().item<double>(), 1e-12))
        << GetParam() << ": " << item.key();
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, HfChunkedOutputTest,
                         ::testing::Values("llama_gqa", "llama_tied_llama3_bias", "gpt2"));

// Token ids with their loss masks beside them (data.loss_masks), read as a job reads them,
// give transformers' own loss of its labels with -100 where the mask is 0 (shifted inside the
// model, the mean over the kept labels of both rows) and its gradients: with the output layer
// whole and in chunks of 5 positions, the head untied (llama_gqa) and tied (the others).
class HfMaskedLossTest : public ::testing::TestWithParam<std::string> {};

TEST_P(HfMaskedLossTest, TheMaskedLossAndGradientsEqualTransformersLossOfLabels) {
  torch::set_num_threads(1);
  std::map<std::string, torch::Tensor> reference =
      ReadTensors(kModels + "/" + GetParam() + ".reference.safetensors");
  const torch::Tensor ids = reference.at("input_ids");
  const torch::Tensor on_disk = ids.to(torch::kShort).contiguous();  // uint16: ids < 96
  const torch::Tensor mask = reference.at("labels").ne(kMaskedTarget).to(torch::kByte).contiguous();
  testing::TempDir dir;
  for (const std::string stem : {"train", "val"}) {
    std::ofstream(dir.File(stem + ".bin"), std::ios::binary)
        .write(static_cast<const char*>(on_disk.data_ptr()), on_disk.nbytes());
    std::ofstream(dir.File(stem + ".mask"), std::ios::binary)
        .write(static_cast<const char*>(mask.data_ptr()), mask.nbytes());
  }
  const int window = static_cast<int>(ids.size(1)) - 1;
  Result<std::unique_ptr<Dataset>> data = LoadDataset(
      TokenDataSpec({dir.File("train.bin"), {dir.File("val.bin")}, 2, true}), window, "");
  ASSERT_TRUE(data.ok()) << data.status().message();
  const Batch rows = (*data)->HeldOutSamples(0, 2, SampleFormat::kNextToken);
  ASSERT_TRUE(torch::equal(rows.inputs, ids.narrow(1, 0, window))) << "the windows are the rows";
  for (const std::int64_t chunk : {0, 5}) {
    std::shared_ptr<TrainableModel> model = Build(kModels + "/" + GetParam());
    ASSERT_NE(model, nullptr);
    model->eval();
    model->set_output_chunk(chunk);
    const LossTerms terms = model->ForwardLoss(rows);
    const torch::Tensor loss = terms.sum / static_cast<double>(terms.count);
    const double want = reference.at("masked_loss").item<double>();
    EXPECT_NEAR(loss.item<double>(), want, 1e-6 * want) << GetParam() << " chunk " << chunk;
    loss.backward();
    for (const auto& item : model->named_parameters()) {
      const torch::Tensor& expected = reference.at("masked_grad." + item.key());
      const torch::Tensor& g = item.value().grad();
      ASSERT_TRUE(g.defined()) << item.key();
      EXPECT_LE((g - expected).norm().item<double>(),
                1e-5 * std::max(expected.norm().item<double>(), 1e-12))
          << GetParam() << " chunk " << chunk << ": " << item.key();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, HfMaskedLossTest,
                         ::testing::Values("llama_gqa", "qwen2", "gpt2"));

// The parameters and StateDict() carry the Hugging Face names, each once (a tied head is the
// embedding), so that model.safetensors is what transformers loads.
TEST(HfModelTest, ItsTensorsAreTheFoldersByName) {
  for (const std::string variant : {"llama_gqa", "qwen2", "gpt2"}) {
    std::shared_ptr<TrainableModel> model = Build(kModels + "/" + variant);
    ASSERT_NE(model, nullptr);
    const std::map<std::string, torch::Tensor> folder =
        ReadTensors(kModels + "/" + variant + "/model.safetensors");
    std::set<std::string> names;
    for (const auto& [name, tensor] : model->StateDict()) {
      names.insert(name);
      ASSERT_TRUE(folder.contains(name)) << variant << ": " << name;
      EXPECT_TRUE(torch::equal(tensor, folder.at(name))) << variant << ": " << name;
    }
    std::set<std::string> in_folder;
    for (const auto& [name, tensor] : folder) in_folder.insert(name);
    EXPECT_EQ(names, in_folder) << variant;
    EXPECT_EQ(model->num_blocks(), 2) << "each decoder layer is a block";
  }
}

// AdamW's weight decay shrinks exactly the parameters the transformers Trainer decays
// (Trainer.get_decay_parameter_names, hf/transformers_decay_names.py): the matrices, no bias
// (Qwen2's q/k/v, GPT-2's) and no norm weight (RMSNorm, GPT-2's LayerNorm), a tied head once.
class HfWeightDecayTest : public ::testing::TestWithParam<std::string> {};

TEST_P(HfWeightDecayTest, DecaysTheParametersTheTransformersTrainerDecays) {
  const std::string folder = kModels + "/" + GetParam();
  std::shared_ptr<TrainableModel> model = Build(folder);
  ASSERT_NE(model, nullptr);
  std::set<std::string> decayed, kept;
  for (const auto& item : NamedTrainableParameters(*model))
    (DecaysWeight(item.value()) ? decayed : kept).insert(item.key());
  testing::ChildProcess python(
      {TRAINERD_HF_PYTHON, TRAINERD_HF_SCRIPTS "/transformers_decay_names.py", folder});
  const std::vector<std::string> lines = python.ReadAllLines();
  ASSERT_EQ(python.ExitCode(), 0) << python.ReadAllStderr();
  EXPECT_EQ(decayed, std::set<std::string>(lines.begin(), lines.end()));
  EXPECT_FALSE(kept.empty()) << "every variant has norm weights";
}

INSTANTIATE_TEST_SUITE_P(Variants, HfWeightDecayTest,
                         ::testing::Values("llama_gqa", "llama_tied_llama3_bias", "qwen2",
                                           "mistral", "gpt2"));

// What trainer-run writes beside the trained weights is a Hugging Face folder: config.json
// (float32 under both dtype and torch_dtype, the keys transformers 5 and 4.x read, whichever
// its source had) and generation_config.json from the folder it trained, model.safetensors
// by Hugging Face names. transformers loads it with no missing or unexpected weight and
// computes the logits trainerd's model computes from it, within 1e-5.
class HfReleaseTest : public ::testing::TestWithParam<std::string> {};

TEST_P(HfReleaseTest, TransformersLoadsTheTrainedFolderAndAgreesWithTrainerd) {
  testing::TempDir dir;
  TrainFolder(dir, kModels + "/" + GetParam(), "");
  ASSERT_FALSE(::testing::Test::HasFailure());
  const std::string out = dir.File("out");
  for (const char* name : {"config.json", "generation_config.json", "model.safetensors"}) {
    EXPECT_TRUE(fs::exists(out + "/" + name)) << name;
  }
  const nlohmann::json config = nlohmann::json::parse(testing::ReadFile(out + "/config.json"));
  EXPECT_EQ(config["dtype"], "float32");
  EXPECT_EQ(config["torch_dtype"], "float32");

  const auto [ids, logits] = LogitsOf(out, dir.File("ids.safetensors"));
  ASSERT_TRUE(logits.defined());
  ExpectSameLogits(
      logits, PythonLogits({TRAINERD_HF_PYTHON, TRAINERD_HF_SCRIPTS "/transformers_logits.py", out,
                            dir.File("ids.safetensors"), dir.File("logits.safetensors")}));
  // Trained: not the folder it started from.
  const torch::Tensor before = Build(kModels + "/" + GetParam())->forward(ids);
  EXPECT_GT((logits - before).abs().max().item<double>(), 1e-3);
}

// Llama (tied, biased, llama3 rope) and GPT-2 from a checkpoint named as the Hub's: the
// release carries the Hugging Face names whatever names the folder used.
INSTANTIATE_TEST_SUITE_P(Variants, HfReleaseTest,
                         ::testing::Values("llama_tied_llama3_bias", "gpt2_hub_names"));

// An adapter job (finetune: {method: lora}) on a folder releases the adapter as peft saves one
// and the model with it merged: peft loads the adapter onto the base folder and computes the
// logits trainerd's released model computes, within 1e-5; the release differs from the base
// folder only in the targeted layers' weights. GPT-2's Conv1D stores its weight [in, out]
// (peft's fan_in_fan_out).
class HfAdapterReleaseTest
    : public ::testing::TestWithParam<std::pair<std::string, std::vector<std::string>>> {};

TEST_P(HfAdapterReleaseTest, PeftLoadsTheAdapterOntoTheBaseAndAgreesWithTheMergedRelease) {
  const auto& [variant, targets] = GetParam();
  const std::string base = kModels + "/" + variant;
  testing::TempDir dir;
  std::string target_list;
  for (const std::string& t : targets) target_list += (target_list.empty() ? "" : ", ") + t;
  const std::vector<std::string> events =
      TrainFolder(dir, base,
                  "finetune: {method: lora, rank: 4, alpha: 8, dropout: 0.1, targets: [" +
                      target_list + "]}\n");
  ASSERT_FALSE(::testing::Test::HasFailure());
  const std::string out = dir.File("out");
  // The FLOPs of an update without the frozen weights' gradients, counted before the merge.
  const nlohmann::json finish = nlohmann::json::parse(events.back());
  ASSERT_EQ(finish["event"], "finish");
  EXPECT_NE(finish["flops_method"].get<std::string>().find("frozen"), std::string::npos)
      << finish["flops_method"];
  const std::string adapter_dir = out + "/adapter";
  const nlohmann::json config =
      nlohmann::json::parse(testing::ReadFile(adapter_dir + "/adapter_config.json"));
  EXPECT_EQ(config["peft_type"], "LORA");
  EXPECT_EQ(config["r"], 4);
  const nlohmann::json about = nlohmann::json::parse(testing::ReadFile(out + "/model.json"));
  EXPECT_EQ(about["finetune"]["method"], "lora");
  const nlohmann::json& companions = about["files"]["companions"];
  for (const char* name : {"adapter/adapter_config.json", "adapter/adapter_model.safetensors"}) {
    EXPECT_NE(std::find(companions.begin(), companions.end(), name), companions.end()) << name;
  }

  // The merged release differs from the base only in the targeted layers' weights.
  const std::map<std::string, torch::Tensor> released = ReadTensors(out + "/model.safetensors");
  const std::map<std::string, torch::Tensor> adapter =
      ReadTensors(adapter_dir + "/adapter_model.safetensors");
  int changed = 0;
  for (const auto& [name, tensor] : Build(base)->StateDict()) {
    ASSERT_TRUE(released.contains(name)) << name;
    bool targeted = false;
    for (const std::string& t : targets) {
      targeted |= name.ends_with("." + t + ".weight");
    }
    if (targeted) {
      ++changed;
      EXPECT_FALSE(torch::equal(released.at(name), tensor)) << name << " did not change";
      const std::string layer = name.substr(0, name.size() - std::string(".weight").size());
      EXPECT_TRUE(adapter.contains("base_model.model." + layer + ".lora_A.weight")) << layer;
    } else {
      EXPECT_TRUE(torch::equal(released.at(name), tensor)) << name << " changed";
    }
  }
  EXPECT_EQ(static_cast<std::size_t>(2 * changed), adapter.size());
  EXPECT_EQ(released.size(), Build(base)->StateDict().size()) << "no adapter tensor in it";

  const auto [ids, logits] = LogitsOf(out, dir.File("ids.safetensors"));
  ASSERT_TRUE(logits.defined());
  ExpectSameLogits(logits, PythonLogits({TRAINERD_HF_PYTHON, TRAINERD_HF_SCRIPTS "/peft_logits.py",
                                         base, adapter_dir, dir.File("ids.safetensors"),
                                         dir.File("peft.safetensors")}));
  // The release folder itself is the plain merged model to transformers, peft installed or not.
  ExpectSameLogits(
      logits, PythonLogits({TRAINERD_HF_PYTHON, TRAINERD_HF_SCRIPTS "/transformers_logits.py", out,
                            dir.File("ids.safetensors"), dir.File("merged.safetensors")}));
  const torch::Tensor before = Build(base)->forward(ids);
  EXPECT_GT((logits - before).abs().max().item<double>(), 1e-4) << "the adapter trained";
}

INSTANTIATE_TEST_SUITE_P(
    Variants, HfAdapterReleaseTest,
    ::testing::Values(std::make_pair(std::string("llama_gqa"),
                                     std::vector<std::string>{"q_proj", "v_proj", "down_proj"}),
                      std::make_pair(std::string("gpt2"),
                                     std::vector<std::string>{"c_attn", "mlp.c_proj"})),
    [](const auto& info) { return info.param.first; });

// An adapter job continued from an earlier night's release (init_from) trains its adapter on
// that release's merged weights: its adapter_config.json names the release as the base, and
// peft, putting the adapter on it, computes the continued release's logits. (Named after the
// first night's base, peft would drop every earlier night.)
TEST(HfAdapterContinuedTest, TheAdapterNamesTheReleaseItWasTrainedOnAsItsBase) {
  const std::string folder = kModels + "/llama_gqa";
  const std::string finetune =
      "finetune: {method: lora, rank: 4, alpha: 8, targets: [q_proj, v_proj]}\n";
  testing::TempDir first, second;
  TrainFolder(first, folder, finetune);
  const std::string release = first.File("out");
  TrainFolder(second, folder, finetune, {"--init-from", release});
  ASSERT_FALSE(::testing::Test::HasFailure());
  const auto base_of = [](const std::string& out) {
    return nlohmann::json::parse(
        testing::ReadFile(out + "/adapter/adapter_config.json"))["base_model_name_or_path"];
  };
  EXPECT_EQ(base_of(release), folder);
  const std::string out = second.File("out");
  ASSERT_EQ(base_of(out), release);

  const auto [ids, logits] = LogitsOf(out, second.File("ids.safetensors"));
  ASSERT_TRUE(logits.defined());
  ExpectSameLogits(logits, PythonLogits({TRAINERD_HF_PYTHON, TRAINERD_HF_SCRIPTS "/peft_logits.py",
                                         release, out + "/adapter", second.File("ids.safetensors"),
                                         second.File("peft.safetensors")}));
}

// Token ids the folder's vocabulary does not cover: the job's data error (exit 3), before
// anything runs, naming config.json's vocab_size.
TEST(HfDataTest, TokensBeyondTheVocabularyAreADataError) {
  testing::TempDir dir;
  const std::string job =
      dir.Write("job.yaml", "model: {kind: hf, path: " + kModels +
                                "/llama_gqa, block_size: 24}\n"
                                "data: {files: [/usr/share/common-licenses/GPL-3]}\n"
                                "training: {effective_batch: 4, updates: 2}\n");
  testing::ChildProcess run({TRAINER_RUN_PATH, "--config", job, "--ledger"});
  run.ReadAllLines();
  EXPECT_EQ(run.ExitCode(), 3);
  EXPECT_NE(run.ReadAllStderr().find("job.yaml: model.path: config.json: vocab_size: the data's "
                                     "token ids go up to 255: expected at least 256, got 96"),
            std::string::npos);
}

// The parity check on a Hugging Face model: an accumulated plan with both layers
// checkpointed, with attention dropout on (the trainer's own: split-invariant), passes
// against the reference; the classic accumulation faults fail it.
TEST(HfParityTest, ACheckpointedAccumulatedPlanPassesAndTheClassicFaultsFail) {
  torch::set_num_threads(1);
  testing::TempDir dir;
  const torch::Tensor tokens = torch::arange(0, 96, 5, torch::kShort).repeat({200});
  std::ofstream(dir.File("train.bin"), std::ios::binary)
      .write(static_cast<const char*>(tokens.data_ptr()), tokens.nbytes());
  std::ofstream(dir.File("val.bin"), std::ios::binary)
      .write(static_cast<const char*>(tokens.data_ptr()), 1000);
  const std::string folder = dir.File("dropout");
  fs::copy(kModels + "/llama_gqa", folder, fs::copy_options::recursive);
  nlohmann::json config = nlohmann::json::parse(testing::ReadFile(folder + "/config.json"));
  config["attention_dropout"] = 0.1;
  std::ofstream(folder + "/config.json") << config.dump(2);
  Result<JobSpec> spec =
      ParseJobSpecText("model: {kind: hf, path: " + folder +
                           ", block_size: 24}\n"
                           "data: {format: tokens, train: train.bin, eval: [val.bin]}\n"
                           "training: {effective_batch: 8, updates: 4, seed: 11}\n"
                           "plan: {microbatch: 2, checkpoint_blocks: [0, 1]}\n",
                       dir.File("job.yaml"));
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  Result<std::unique_ptr<Dataset>> data =
      LoadDataset(spec->data, spec->model.block_size, dir.File("digests.json"));
  ASSERT_TRUE(data.ok()) << data.status().message();
  Result<ParityReport> pass = CheckParity(*spec, **data, 2);
  ASSERT_TRUE(pass.ok()) << pass.status().message();
  EXPECT_TRUE(pass->pass) << ToJson(*pass).dump();
  for (const TrainingFault fault :
       {TrainingFault::kLossPerMicrobatch, TrainingFault::kStepPerMicrobatch,
        TrainingFault::kClipPerMicrobatch, TrainingFault::kRecomputeFreshRng}) {
    Result<ParityReport> failed = CheckParity(*spec, **data, 2, fault);
    ASSERT_TRUE(failed.ok()) << failed.status().message();
    EXPECT_FALSE(failed->pass) << static_cast<int>(fault);
  }
}

// A copy of a fixture folder to break.
class HfBadFolderTest : public ::testing::Test {
 protected:
  std::string Copy(const std::string& variant) {
    const std::string to = dir_.File(variant + "-" + std::to_string(copies_++));
    fs::copy(kModels + "/" + variant, to, fs::copy_options::recursive);
    return to;
  }
  void EditConfig(const std::string& folder, const std::function<void(nlohmann::json&)>& edit) {
    const std::string path = folder + "/config.json";
    nlohmann::json config = nlohmann::json::parse(testing::ReadFile(path));
    edit(config);
    std::ofstream(path) << config.dump(2);
  }
  void EditWeights(const std::string& folder,
                   const std::function<void(std::map<std::string, torch::Tensor>&)>& edit) {
    const std::string path = folder + "/model.safetensors";
    std::map<std::string, torch::Tensor> tensors = ReadTensors(path);
    edit(tensors);
    ASSERT_TRUE(
        WriteSafetensors(path, NamedTensors(tensors.begin(), tensors.end()), {{"format", "pt"}})
            .ok());
  }
  testing::TempDir dir_;
  int copies_ = 0;
};

TEST_F(HfBadFolderTest, EachIsAnErrorNamingTheFileAndTheKeyOrTensor) {
  const auto expect_error = [](const std::string& error, const std::vector<std::string>& parts) {
    EXPECT_FALSE(error.empty());
    for (const std::string& part : parts) {
      EXPECT_NE(error.find(part), std::string::npos) << "'" << part << "' not in: " << error;
    }
  };
  const std::string no_config = Copy("llama_gqa");
  fs::remove(no_config + "/config.json");
  expect_error(ErrorOf(no_config),
               {"hf-job.yaml", "model.path", no_config + "/config.json: missing"});

  const std::string unsupported = Copy("qwen2");
  EditConfig(unsupported, [](nlohmann::json& c) { c["architectures"] = {"FalconForCausalLM"}; });
  expect_error(ErrorOf(unsupported),
               {"config.json: architectures: expected one of LlamaForCausalLM, "
                "Qwen2ForCausalLM, MistralForCausalLM",
                "FalconForCausalLM"});

  const std::string bad_key = Copy("mistral");
  EditConfig(bad_key, [](nlohmann::json& c) { c["num_key_value_heads"] = 3; });
  expect_error(ErrorOf(bad_key), {"config.json: num_key_value_heads: expected a divisor of "
                                  "num_attention_heads (4), got 3"});

  const std::string pad = Copy("llama_gqa");
  EditConfig(pad, [](nlohmann::json& c) { c["pad_token_id"] = 96; });
  expect_error(ErrorOf(pad), {"config.json: pad_token_id: expected a token id in [-vocab_size, "
                              "vocab_size) (vocab_size 96), got 96"});

  const std::string layer_types = Copy("qwen2_window");
  EditConfig(layer_types, [](nlohmann::json& c) { c["layer_types"] = {"full_attention"}; });
  expect_error(ErrorOf(layer_types),
               {"config.json: layer_types: expected a list of 2 (num_hidden_layers) of "
                "\"full_attention\" and \"sliding_attention\", got [\"full_attention\"]"});

  const std::string layer_scaled = Copy("gpt2");
  EditConfig(layer_scaled, [](nlohmann::json& c) { c["scale_attn_by_inverse_layer_idx"] = true; });
  expect_error(ErrorOf(layer_scaled), {"config.json: scale_attn_by_inverse_layer_idx: expected "
                                       "false (trainerd trains that), got true"});

  const std::string few_positions = Copy("gpt2");
  EditConfig(few_positions, [](nlohmann::json& c) { c["n_positions"] = 16; });
  expect_error(ErrorOf(few_positions), {"config.json: n_positions: 16 learned positions, fewer "
                                        "than model.block_size (24)"});

  const std::string missing = Copy("llama_gqa");
  EditWeights(missing, [](auto& t) { t.erase("model.layers.1.mlp.up_proj.weight"); });
  expect_error(ErrorOf(missing), {missing + ": no tensor 'model.layers.1.mlp.up_proj.weight'"});

  const std::string misshapen = Copy("llama_gqa");
  EditWeights(misshapen, [](auto& t) { t["model.norm.weight"] = torch::ones({31}); });
  expect_error(ErrorOf(misshapen), {misshapen + "/model.safetensors: tensor 'model.norm.weight' is "
                                                "[31], config.json makes it [32]"});

  const std::string extra = Copy("llama_gqa");
  EditWeights(extra, [](auto& t) { t["model.layers.7.mlp.up_proj.weight"] = torch::ones({2}); });
  expect_error(ErrorOf(extra), {"has no place for: 'model.layers.7.mlp.up_proj.weight'"});

  const std::string shard = Copy("llama_sharded");
  fs::remove(shard + "/model-00003-of-00006.safetensors");
  expect_error(ErrorOf(shard), {shard + "/model.safetensors.index.json: weight_map names shard "
                                        "model-00003-of-00006.safetensors",
                                "is missing"});
}

// A key transformers fills when a config leaves it out is filled the same way: a Mistral
// config without sliding_window attends over MistralConfig's 4096 positions, a null is no
// window; Qwen2's window is on the layers config.json's layer_types names, or without them on
// those from max_window_layers (default 28) on, and on none without use_sliding_window. What
// transformers reads from the same files, each layer's window, is the test's reference.
TEST_F(HfBadFolderTest, EachLayersWindowIsTheOneTransformersReads) {
  const std::string absent = Copy("mistral");
  EditConfig(absent, [](nlohmann::json& c) { c.erase("sliding_window"); });
  const std::string null = Copy("mistral");  // the fixture's config has "sliding_window": null
  const std::string listed = Copy("qwen2_window");  // layer_types as transformers 5 wrote them
  const std::string derived = Copy("qwen2_window");
  EditConfig(derived, [](nlohmann::json& c) {
    c.erase("layer_types");
    c["max_window_layers"] = 0;
  });
  const std::string defaulted = Copy("qwen2_window");  // max_window_layers 28: no layer
  EditConfig(defaulted, [](nlohmann::json& c) {
    c.erase("layer_types");
    c.erase("max_window_layers");
  });
  const std::string unused = Copy("qwen2_window");
  EditConfig(unused, [](nlohmann::json& c) { c["use_sliding_window"] = false; });
  for (const auto& [folder, want] :
       {std::pair{absent, std::vector<int>{4096, 4096}}, std::pair{null, std::vector<int>{0, 0}},
        std::pair{listed, std::vector<int>{0, 6}}, std::pair{derived, std::vector<int>{6, 6}},
        std::pair{defaulted, std::vector<int>{0, 0}}, std::pair{unused, std::vector<int>{0, 0}}}) {
    Result<HfDecoderConfig> config = ReadHfConfig(folder);
    ASSERT_TRUE(config.ok()) << config.status().message();
    EXPECT_EQ(config->layer_windows, want) << folder;
    testing::ChildProcess python(
        {TRAINERD_HF_PYTHON, "-c",
         "import sys, transformers\n"
         "c = transformers.AutoConfig.from_pretrained(sys.argv[1])\n"
         "types = getattr(c, 'layer_types', None) or ['sliding_attention'] * c.num_hidden_layers\n"
         "print(' '.join(str((c.sliding_window or 0) if t == 'sliding_attention' else 0) "
         "for t in types))",
         folder});
    const std::vector<std::string> lines = python.ReadAllLines();
    ASSERT_EQ(python.ExitCode(), 0) << python.ReadAllStderr();
    ASSERT_FALSE(lines.empty());
    EXPECT_EQ(lines.back(), std::to_string(want[0]) + " " + std::to_string(want[1])) << folder;
  }
}

// The job identity counts what of a folder trains, config.json and the weights: a model card,
// a tokenizer or generation_config.json added or edited leave it, and so a half-trained
// night's checkpoint, as they were; a config value or a weight changed is another job. With
// the weights whole and in shards (the index and each shard count).
TEST_F(HfBadFolderTest, TheJobIdentityHashesTheConfigAndTheWeightsAlone) {
  const ModelKind& hf = ModelKindOf(JobFor(kModels + "/llama_gqa")->model);
  const auto hash = [&](const std::string& folder) {
    Result<std::string> sha = hf.ContentSha256(folder);
    EXPECT_TRUE(sha.ok()) << sha.status().message();
    return sha.ok() ? *sha : "";
  };
  const auto flip_last_byte = [](const std::string& path) {
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekg(-1, std::ios::end);
    const char last = static_cast<char>(file.get());
    file.seekp(-1, std::ios::end);
    file.put(static_cast<char>(last ^ 1));
  };
  for (const std::string variant : {"llama_gqa", "llama_sharded"}) {
    const std::string folder = Copy(variant);
    const std::string before = hash(folder);
    std::ofstream(folder + "/README.md") << "# A model card\n";
    std::ofstream(folder + "/tokenizer.json") << "{}";
    std::ofstream(folder + "/generation_config.json") << R"({"max_new_tokens": 7})";
    EXPECT_EQ(hash(folder), before) << variant;

    const std::string weights = Copy(variant);
    std::vector<std::string> files;
    for (const auto& entry : fs::directory_iterator(weights)) {
      if (entry.path().extension() == ".safetensors") files.push_back(entry.path().string());
    }
    ASSERT_FALSE(files.empty());
    flip_last_byte(*std::min_element(files.begin(), files.end()));
    EXPECT_NE(hash(weights), before) << variant << ": a weight changed";

    EditConfig(folder, [](nlohmann::json& c) { c["rms_norm_eps"] = 1e-5; });
    EXPECT_NE(hash(folder), before) << variant << ": config.json changed";
  }
  const std::string sharded = Copy("llama_sharded");
  const std::string before = hash(sharded);
  std::ofstream(sharded + "/model.safetensors.index.json", std::ios::app) << "\n";
  EXPECT_NE(hash(sharded), before) << "the index changed";
}

// Values of the wrong JSON type threw out of nlohmann's value(): a worker's internal error,
// and in the daemon (which reads config.json at start-up and in each cycle) a dead loop.
TEST_F(HfBadFolderTest, AValueOfTheWrongJsonTypeIsAnErrorNamingTheKey) {
  const struct {
    const char* variant;
    std::function<void(nlohmann::json&)> edit;
    std::string error;
  } cases[] = {
      {"llama_gqa", [](nlohmann::json& c) { c["hidden_act"] = nullptr; },
       "config.json: hidden_act: expected a string, got null"},
      {"llama_gqa", [](nlohmann::json& c) { c["model_type"] = 1; },
       "config.json: model_type: expected a string, got 1"},
      {"llama_gqa",
       [](nlohmann::json& c) {
         c.erase("rope_parameters");
         c["rope_scaling"] = {{"rope_type", 3}};
       },
       "config.json: rope_scaling.rope_type: expected a string, got 3"},
      {"llama_gqa",
       [](nlohmann::json& c) {
         c.erase("rope_parameters");
         c["rope_scaling"] = {{"rope_type", "llama3"},
                              {"factor", 8},
                              {"low_freq_factor", 1},
                              {"high_freq_factor", 4},
                              {"original_max_position_embeddings", 1e300}};
       },
       "config.json: rope_scaling.original_max_position_embeddings: expected a number of "
       "positions in [1, 2^30]"},
      {"gpt2",
       [](nlohmann::json& c) {
         c["activation_function"] = {1, 2};
       },
       "config.json: activation_function: expected a string, got [1,2]"},
  };
  for (const auto& c : cases) {
    const std::string folder = Copy(c.variant);
    EditConfig(folder, c.edit);
    const std::string error = ErrorOf(folder);
    EXPECT_NE(error.find(c.error), std::string::npos)
        << "expected: " << c.error << "\ngot: " << error;
  }
  const std::string deep = Copy("qwen2");
  std::ofstream(deep + "/config.json") << std::string(100000, '[') + std::string(100000, ']');
  EXPECT_NE(ErrorOf(deep).find("config.json: not a JSON object"), std::string::npos);
}

// The release carries the config.json and generation settings the night trained with, read
// when the model was built: a folder edited hours later (they were read at finish) changes
// nothing of it.
TEST_F(HfBadFolderTest, TheReleaseCarriesTheFilesAsTheNightStarted) {
  const std::string folder = Copy("llama_gqa");
  const std::string generation = testing::ReadFile(folder + "/generation_config.json");
  ASSERT_FALSE(generation.empty());
  const std::shared_ptr<TrainableModel> model = Build(folder);
  ASSERT_NE(model, nullptr);
  EditConfig(folder, [](nlohmann::json& c) { c["hidden_act"] = nullptr; });
  std::ofstream(folder + "/generation_config.json") << "edited";
  const std::string out = dir_.File("release");
  fs::create_directories(out);
  Result<std::vector<std::string>> written = model->WriteCompanionFiles(out);
  ASSERT_TRUE(written.ok()) << written.status().message();
  const nlohmann::json config = nlohmann::json::parse(testing::ReadFile(out + "/config.json"));
  EXPECT_EQ(config["hidden_act"], "silu");
  EXPECT_EQ(testing::ReadFile(out + "/generation_config.json"), generation);
}

// A folder whose weights cannot fit the host is refused from its config.json, before any
// allocation (the worker died in an allocation error, or in the kernel's OOM kill).
TEST_F(HfBadFolderTest, AModelLargerThanTheHostsMemoryIsRefusedBeforeItIsBuilt) {
  const std::string huge = Copy("llama_gqa");
  EditConfig(huge, [](nlohmann::json& c) {
    c["hidden_size"] = 1 << 16;
    c["intermediate_size"] = 1 << 18;
    c["num_hidden_layers"] = 1 << 12;
    c["head_dim"] = 64;
  });
  const std::string error = ErrorOf(huge);
  EXPECT_NE(error.find(huge + "/config.json: its model's fp32 weights alone take"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("GiB available (MemAvailable)"), std::string::npos) << error;
}

// A sharded folder's index and shards are someone else's files: the index names files of the
// folder only, a shard is a regular file (a FIFO blocked the worker until its deadline), a
// tensor comes from one shard (the last one silently won), and integer elements are no
// weights (they were converted to float).
TEST_F(HfBadFolderTest, AnIndexOrShardThatIsNotTheFoldersOwnIsRefused) {
  const auto edit_index = [](const std::string& folder,
                             const std::function<void(nlohmann::json&)>& edit) {
    const std::string path = folder + "/model.safetensors.index.json";
    nlohmann::json index = nlohmann::json::parse(testing::ReadFile(path));
    edit(index);
    std::ofstream(path) << index.dump(2);
  };
  const std::string outside = Copy("llama_sharded");
  edit_index(outside, [](nlohmann::json& i) {
    i["weight_map"]["model.norm.weight"] = "../llama_gqa-0/model.safetensors";
  });
  EXPECT_NE(ErrorOf(outside).find("weight_map.model.norm.weight: expected the name of a file in "
                                  "the folder, got \"../llama_gqa-0/model.safetensors\""),
            std::string::npos)
      << ErrorOf(outside);

  const std::string fifo = Copy("llama_sharded");
  const std::string shard = fifo + "/model-00003-of-00006.safetensors";
  fs::remove(shard);
  ASSERT_EQ(::mkfifo(shard.c_str(), 0600), 0);
  EXPECT_NE(ErrorOf(fifo).find(shard + ": not a regular file"), std::string::npos) << ErrorOf(fifo);

  const std::string twice = Copy("llama_sharded");
  const nlohmann::json index =
      nlohmann::json::parse(testing::ReadFile(twice + "/model.safetensors.index.json"));
  const std::string norm_shard = index["weight_map"]["model.norm.weight"];
  const std::string other_shard = norm_shard == "model-00001-of-00006.safetensors"
                                      ? "model-00002-of-00006.safetensors"
                                      : "model-00001-of-00006.safetensors";
  const std::string other_path = twice + "/" + other_shard;
  std::map<std::string, torch::Tensor> tensors = ReadTensors(other_path);
  tensors["model.norm.weight"] = torch::zeros({32});
  ASSERT_TRUE(
      WriteSafetensors(other_path, NamedTensors(tensors.begin(), tensors.end()), {{"format", "pt"}})
          .ok());
  EXPECT_NE(ErrorOf(twice).find("tensor 'model.norm.weight' is in both"), std::string::npos)
      << ErrorOf(twice);

  const std::string integers = Copy("llama_gqa");
  EditWeights(integers, [](auto& t) { t["model.norm.weight"] = torch::ones({32}, torch::kInt64); });
  EXPECT_NE(ErrorOf(integers).find("tensor 'model.norm.weight' holds int64 elements"),
            std::string::npos)
      << ErrorOf(integers);
}

}  // namespace
}  // namespace trainerd
