#include "trainerd/trainer/spec/job_spec_parser.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "../support/temp_dir.h"

namespace trainerd {
namespace {

std::string SourceDir() {
  const char* dir = std::getenv("TRAINERD_SOURCE_DIR");
  return dir != nullptr ? dir : ".";
}

constexpr const char* kMinimal = R"(model:
  n_layer: 2
  n_head: 2
  n_embd: 32
  block_size: 16
data:
  files: [corpus.txt]
)";

// Parses `yaml` as if it were the file "job.yaml" and returns the error message.
std::string ErrorOf(const std::string& yaml) {
  Result<JobSpec> spec = ParseJobSpecText(yaml, "job.yaml");
  EXPECT_FALSE(spec.ok()) << "expected an error for:\n" << yaml;
  return spec.ok() ? "" : spec.status().message();
}

TEST(JobSpecParserTest, BundledDefaultConfigParses) {
  Result<JobSpec> spec = ParseJobSpecFile(SourceDir() + "/configs/default.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->model.kind, "gpt");
  EXPECT_EQ(spec->model.options["n_layer"], 4);
  EXPECT_EQ(spec->training.effective_batch, 32);
  EXPECT_EQ(spec->plan.microbatch, 32);
  EXPECT_EQ(spec->runtime.threads, 0);  // auto
  EXPECT_EQ(spec->memory.budget_bytes, 64LL << 20);
  EXPECT_DOUBLE_EQ(spec->memory.reserve_fraction, 0.10);
  ASSERT_TRUE(spec->window_seconds.has_value());
  EXPECT_DOUBLE_EQ(*spec->window_seconds, 6 * 3600.0);
  EXPECT_EQ(spec->data.options["files"].size(), 7u);
}

TEST(JobSpecParserTest, DefaultsFillOmittedKeysAndRelativePathsAnchorAtTheFile) {
  Result<JobSpec> spec = ParseJobSpecText(kMinimal, "/etc/trainerd/job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->data.options["files"].at(0), "/etc/trainerd/corpus.txt");
  EXPECT_EQ(spec->plan.microbatch, spec->training.effective_batch);
  EXPECT_DOUBLE_EQ(spec->optimizer.beta2, 0.95);
  EXPECT_FALSE(spec->window_seconds.has_value());
}

TEST(JobSpecParserTest, UnknownKeyNamesFileLineAndKey) {
  const std::string error = ErrorOf(std::string(kMinimal) + "training:\n  updatez: 5\n");
  EXPECT_NE(error.find("job.yaml:9: training.updatez: unknown key"), std::string::npos) << error;
}

// Found by tests/fuzz/job_spec_parser_fuzzer: YAML allows a list or a mapping as a key, and
// the unknown-key check threw YAML::TypedBadConversion out of the parser.
TEST(JobSpecParserTest, AListOrMappingAsAKeyIsAnErrorNotAnException) {
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "? [a, b]\n: 1\n"),
            "job.yaml:8: top level: expected a key name, got a list");
  EXPECT_EQ(ErrorOf("model:\n  n_layer: 2\n  ? {x: 1}\n  : 2\ndata:\n  files: [c.txt]\n"),
            "job.yaml:3: model: expected a key name, got a mapping");
}

TEST(JobSpecParserTest, WrongTypeNamesExpectedValue) {
  const std::string error = ErrorOf(std::string(kMinimal) + "training:\n  updates: many\n");
  EXPECT_NE(error.find("job.yaml:9: training.updates: expected an integer in [1, "),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("got 'many'"), std::string::npos) << error;
}

TEST(JobSpecParserTest, BatchNormAccumulationIsOffUnlessTheJobSaysTrue) {
  Result<JobSpec> spec = ParseJobSpecText(kMinimal, "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_FALSE(spec->training.allow_batch_norm_accumulation);
  spec = ParseJobSpecText(
      std::string(kMinimal) + "training:\n  allow_batch_norm_accumulation: true\n", "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_TRUE(spec->training.allow_batch_norm_accumulation);
  const std::string error =
      ErrorOf(std::string(kMinimal) + "training:\n  allow_batch_norm_accumulation: maybe\n");
  EXPECT_NE(error.find("job.yaml:9: training.allow_batch_norm_accumulation"), std::string::npos)
      << error;
}

TEST(JobSpecParserTest, TheGptsKernelsAreFusedUnlessTheJobSaysExplicit) {
  Result<JobSpec> spec = ParseJobSpecText(kMinimal, "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->model.options["kernels"], "fused");
  const std::string with_kernels =
      "model:\n  kernels: explicit\n" + std::string(kMinimal).substr(7);
  spec = ParseJobSpecText(with_kernels, "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->model.options["kernels"], "explicit");
  const std::string error = ErrorOf("model:\n  kernels: flash\n" + std::string(kMinimal).substr(7));
  EXPECT_NE(error.find("job.yaml:2: model.kernels"), std::string::npos) << error;
  EXPECT_NE(error.find("flash"), std::string::npos) << error;
}

TEST(JobSpecParserTest, OutOfRangeValueIsRejected) {
  const std::string error = ErrorOf(std::string(kMinimal) + "optimizer:\n  lr: -1\n");
  EXPECT_NE(error.find("optimizer.lr: expected a number in (0, 10]"), std::string::npos) << error;
}

TEST(JobSpecParserTest, CrossFieldChecks) {
  std::string error = ErrorOf("model: {n_head: 3, n_embd: 32}\ndata: {files: [a]}\n");
  EXPECT_NE(error.find("model.n_head: expected an integer that divides model.n_embd (32), got 3"),
            std::string::npos)
      << error;
  error =
      ErrorOf(std::string(kMinimal) + "training: {effective_batch: 8}\nplan: {microbatch: 16}\n");
  EXPECT_NE(error.find("plan.microbatch: expected at most training.effective_batch (8)"),
            std::string::npos)
      << error;
}

TEST(JobSpecParserTest, SizesDurationsAndFractions) {
  Result<JobSpec> spec = ParseJobSpecText(
      std::string(kMinimal) + "memory: {budget: 0.34GB, reserve: 0.2, host_budget: 8GiB}\n" +
          "window: 90m\n",
      "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->memory.budget_bytes, 340'000'000);
  EXPECT_DOUBLE_EQ(spec->memory.reserve_fraction, 0.2);
  EXPECT_EQ(spec->memory.host_budget_bytes, 8LL << 30);
  EXPECT_NE(ErrorOf(std::string(kMinimal) + "memory: {host_budget: -1GB}\n")
                .find("memory.host_budget: expected a positive size"),
            std::string::npos);
  EXPECT_DOUBLE_EQ(*spec->window_seconds, 5400.0);
  EXPECT_NE(ErrorOf(std::string(kMinimal) + "memory: {budget: lots}\n")
                .find("memory.budget: expected a positive size such as 24GiB"),
            std::string::npos);
  EXPECT_NE(ErrorOf(std::string(kMinimal) + "window: 6d\n")
                .find("window: expected a positive duration such as 6h"),
            std::string::npos);
}

// Issue 46: on the CPU the host is the device unless the job says the CPU simulates one; a
// real accelerator is not simulated.
TEST(JobSpecParserTest, OnlyACpuJobSimulatesAnAccelerator) {
  Result<JobSpec> plain = ParseJobSpecText(kMinimal, "job.yaml");
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_FALSE(plain->memory.simulated_device);
  EXPECT_TRUE(HostIsTheDevice(*plain));
  Result<JobSpec> simulated =
      ParseJobSpecText(std::string(kMinimal) + "memory: {simulated_device: true}\n", "job.yaml");
  ASSERT_TRUE(simulated.ok()) << simulated.status().message();
  EXPECT_FALSE(HostIsTheDevice(*simulated));
  const std::string error = ErrorOf(std::string(kMinimal) +
                                    "runtime: {device: cuda}\nmemory: {simulated_device: true}\n");
  EXPECT_NE(error.find("memory.simulated_device: expected false with runtime.device cuda"),
            std::string::npos)
      << error;
}

TEST(JobSpecParserTest, MissingDataFilesKeyIsAnError) {
  EXPECT_NE(ErrorOf("model: {n_layer: 1}\n").find("data.files: expected a non-empty list"),
            std::string::npos);
}

TEST(JobSpecParserTest, APluginModelsLibraryNameAndOptionsAsItsFactoryGetsThem) {
  Result<JobSpec> spec = ParseJobSpecText(R"(model:
  kind: plugin
  library: plugins/libmine.so
  name: mine
  options: {width: 64, scale: 0.5, gated: true, act: gelu, tag: "16", sizes: [1, 2], nested: {a: ~}}
data: {format: tensors, train: train, eval: [val]}
plan: {checkpoint_blocks: all}
)",
                                          "/jobs/job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->model.kind, "plugin");
  EXPECT_EQ(spec->model.options["library"], "/jobs/plugins/libmine.so");
  EXPECT_EQ(spec->model.options["name"], "mine");
  EXPECT_EQ(spec->model.options["options"],
            nlohmann::json::parse(R"({"width": 64, "scale": 0.5, "gated": true, "act": "gelu",
                                      "tag": "16", "sizes": [1, 2], "nested": {"a": null}})"));
  EXPECT_EQ(spec->model.inputs, ModelInputs::kRows);
  // The blocks are counted when the worker loads the library: "all" waits for it.
  EXPECT_TRUE(spec->plan_checkpoints_all_blocks);
  EXPECT_TRUE(spec->plan.checkpoint_blocks.empty());

  EXPECT_NE(ErrorOf("model: {kind: plugin}\ndata: {files: [a]}\n")
                .find("model.library: expected the plugin's shared library"),
            std::string::npos);
  EXPECT_NE(ErrorOf("model: {kind: plugin, library: a.so, options: [1]}\ndata: {files: [a]}\n")
                .find("model.options: expected a mapping of option names to values"),
            std::string::npos);
  EXPECT_NE(ErrorOf("model: {kind: plugin, library: a.so, path: m.pt}\ndata: {files: [a]}\n")
                .find("model.path: unknown key"),
            std::string::npos);
}

TEST(JobSpecParserTest, InitFromIsTheCurrentReleaseOrAPathBesideTheJob) {
  Result<JobSpec> current =
      ParseJobSpecText("init_from: current_release\ndata: {files: [a.txt]}\n", "/jobs/job.yaml");
  ASSERT_TRUE(current.ok()) << current.status().message();
  EXPECT_TRUE(current->init_from.current_release);
  EXPECT_EQ(current->init_from.path, "");
  Result<JobSpec> path =
      ParseJobSpecText("init_from: releases/run-3\ndata: {files: [a.txt]}\n", "/jobs/job.yaml");
  ASSERT_TRUE(path.ok()) << path.status().message();
  EXPECT_FALSE(path->init_from.current_release);
  EXPECT_EQ(path->init_from.path, "/jobs/releases/run-3");
  Result<JobSpec> none = ParseJobSpecText("data: {files: [a.txt]}\n", "/jobs/job.yaml");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->init_from.current_release);
  EXPECT_EQ(none->init_from.path, "");
}

TEST(JobSpecParserTest, TensorDataAndTheLossOfATorchScriptModel) {
  Result<JobSpec> spec = ParseJobSpecText(R"(model: {kind: torchscript, path: m.pt, loss: mse}
data: {format: tensors, train: train, eval: [val.safetensors, test], targets: labels}
)",
                                          "/jobs/job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->data.format, "tensors");
  EXPECT_EQ(spec->data.options["train"], "/jobs/train");
  EXPECT_EQ(spec->data.options["eval"],
            (std::vector<std::string>{"/jobs/val.safetensors", "/jobs/test"}));
  EXPECT_EQ(spec->data.options["inputs"], "inputs");
  EXPECT_EQ(spec->data.options["targets"], "labels");
  EXPECT_EQ(spec->model.inputs, ModelInputs::kRows);  // the default for tensors
  EXPECT_EQ(spec->model.loss.kind, LossKind::kMse);
  Result<JobSpec> tokens = ParseJobSpecText(
      "model: {kind: torchscript, path: m.pt, ignore_index: -1}\ndata: {files: [a.txt]}\n",
      "/jobs/job.yaml");
  ASSERT_TRUE(tokens.ok()) << tokens.status().message();
  EXPECT_EQ(tokens->model.inputs, ModelInputs::kTokens);
  EXPECT_EQ(tokens->model.loss.kind, LossKind::kCrossEntropy);
  EXPECT_EQ(tokens->model.loss.ignore_index, -1);

  EXPECT_NE(ErrorOf("model: {kind: torchscript, path: m.pt, loss: hinge}\ndata: {files: [a]}\n")
                .find("model.loss: expected one of cross_entropy mse module, got 'hinge'"),
            std::string::npos);
  // The built-in models train with cross_entropy.
  EXPECT_NE(ErrorOf("model: {loss: mse}\ndata: {files: [a]}\n").find("model.loss: unknown key"),
            std::string::npos);
  EXPECT_NE(ErrorOf("data: {format: tensors, eval: [v]}\n")
                .find("data.train: expected the training split"),
            std::string::npos);
}

// data.loss_masks gives the targets it leaves out as -100: a model that ignores another id
// would train on them (or index its logits with -100), so the job is refused.
TEST(JobSpecParserTest, LossMasksNeedTheModelToIgnoreMinusOneHundred) {
  const std::string masked =
      "data: {format: tokens, train: t.bin, eval: [v.bin], loss_masks: true}\n";
  Result<JobSpec> spec =
      ParseJobSpecText("model: {kind: gpt, block_size: 16}\n" + masked, "/j/job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_TRUE(spec->data.options["loss_masks"].get<bool>());
  EXPECT_FALSE(
      ParseJobSpecText("data: {format: tokens, train: t.bin, eval: [v.bin]}\n", "/j/job.yaml")
          ->data.options["loss_masks"]
          .get<bool>());
  EXPECT_NE(ErrorOf("model: {kind: torchscript, path: m.pt, ignore_index: 0}\n" + masked)
                .find("model.ignore_index: expected -100 (data.loss_masks and "
                      "data.document_end give the targets they leave out as -100), got 0"),
            std::string::npos)
      << ErrorOf("model: {kind: torchscript, path: m.pt, ignore_index: 0}\n" + masked);
  EXPECT_TRUE(
      ParseJobSpecText("model: {kind: torchscript, path: m.pt, ignore_index: -100}\n" + masked,
                       "/j/job.yaml")
          .ok());
}

// data.document_end: a model kind that cannot keep packed documents apart is refused (it would
// let them attend to each other), unless each window holds one; packing asks for documents;
// their first ids are left out as -100.
TEST(JobSpecParserTest, PackedDocumentsNeedAKindThatKeepsThemApart) {
  const std::string packed =
      "data: {format: tokens, train: t.bin, eval: [v.bin], document_end: 2}\n";
  EXPECT_TRUE(
      ParseJobSpecText("model: {kind: gpt, block_size: 16}\n" + packed, "/j/job.yaml").ok());
  const std::string own = "model: {kind: torchscript, path: m.pt, ignore_index: -100}\n";
  EXPECT_NE(ErrorOf(own + packed)
                .find("model.kind: expected a kind that keeps packed documents "
                      "apart (gpt, hf) for data.document_end, or data.packing: "
                      "false (one document per window), got torchscript"),
            std::string::npos)
      << ErrorOf(own + packed);
  const std::string padded =
      "data: {format: tokens, train: t.bin, eval: [v.bin], document_end: 2, packing: false}\n";
  EXPECT_TRUE(ParseJobSpecText(own + padded, "/j/job.yaml").ok());
  EXPECT_NE(ErrorOf("data: {format: tokens, train: t.bin, eval: [v.bin], packing: false}\n")
                .find("data.packing: expected data.document_end beside it"),
            std::string::npos);
  EXPECT_NE(ErrorOf("model: {kind: torchscript, path: m.pt, ignore_index: 0}\n" + padded)
                .find("model.ignore_index: expected -100"),
            std::string::npos);
}

TEST(JobSpecParserTest, InvalidYamlNamesTheLine) {
  const std::string error = ErrorOf("model:\n  n_layer: [1,\n");
  EXPECT_NE(error.find("job.yaml:"), std::string::npos) << error;
  EXPECT_NE(error.find("not valid YAML"), std::string::npos) << error;
}

TEST(JobSpecParserTest, MissingFileIsNotFound) {
  testing::TempDir dir;
  Result<JobSpec> spec = ParseJobSpecFile(dir.File("absent.yaml"));
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), Status::Code::kNotFound);
  EXPECT_NE(spec.status().message().find("absent.yaml"), std::string::npos);
}

TEST(JobSpecParserTest, ThreadsAcceptAutoOrACount) {
  Result<JobSpec> spec = ParseJobSpecText(std::string(kMinimal) + "runtime: {threads: 3}\n", "j");
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->runtime.threads, 3);
  EXPECT_NE(ErrorOf(std::string(kMinimal) + "runtime: {threads: some}\n")
                .find("runtime.threads: expected auto or an integer"),
            std::string::npos);
}

TEST(JobSpecParserTest, PlanDerivesAccumulationAndNamesBlocks) {
  Result<JobSpec> spec = ParseJobSpecText(std::string(kMinimal) +
                                              "training: {effective_batch: 10}\nplan: {microbatch: "
                                              "4, checkpoint_blocks: all, precision: bf16}\n",
                                          "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->plan.accumulation_steps, 3);  // 4 + 4 + 2
  EXPECT_EQ(spec->plan.checkpoint_blocks, (std::vector<int>{0, 1}));
  EXPECT_EQ(spec->plan.precision, Precision::kBf16);

  spec = ParseJobSpecText(std::string(kMinimal) +
                              "training: {effective_batch: 32}\nplan: {accumulation_steps: 4, "
                              "checkpoint_blocks: [1, 1], precision: fp16}\n",
                          "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->plan.microbatch, 8);
  EXPECT_EQ(spec->plan.checkpoint_blocks, (std::vector<int>{1}));
  EXPECT_EQ(spec->plan.precision, Precision::kFp16);

  spec = ParseJobSpecText(std::string(kMinimal) + "plan: {checkpoint_blocks: none}\n", "job.yaml");
  ASSERT_TRUE(spec.ok());
  EXPECT_TRUE(spec->plan.checkpoint_blocks.empty());
  EXPECT_EQ(spec->plan.accumulation_steps, 1);
  EXPECT_EQ(spec->plan.optimizer_state, StatePlacement::kDevice);

  spec = ParseJobSpecText(std::string(kMinimal) + "plan: {optimizer_state: host}\n", "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->plan.optimizer_state, StatePlacement::kHost);
  EXPECT_EQ(spec->plan.zero_stage, 0);

  spec = ParseJobSpecText(
      std::string(kMinimal) + "distributed: {ranks: 2}\nplan: {zero_stage: 2}\n", "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->plan.zero_stage, 2);
  EXPECT_EQ(RankJob(*spec).distributed.job_ranks, 2);
  EXPECT_EQ(RankJob(*spec).distributed.ranks, 1);

  EXPECT_EQ(spec->plan.output_chunk, 0) << "the output layer's loss at once by default";
  spec = ParseJobSpecText(std::string(kMinimal) + "plan: {output_chunk: 64}\n", "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->plan.output_chunk, 64);
  spec = ParseJobSpecText(std::string(kMinimal) + "plan: {output_chunk: -1}\n", "job.yaml");
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.status().message().find("plan.output_chunk"), std::string::npos)
      << spec.status().message();
}

// The step inside the backward is exact for an update of one microbatch whose gradients are
// complete after its backward: every other plan or job is refused naming the key and why.
TEST(JobSpecParserTest, TheStepInsideTheBackwardOnlyWhereItIsExact) {
  const std::string job = std::string(kMinimal) + "training: {effective_batch: 8}\n";
  Result<JobSpec> spec = ParseJobSpecText(job, "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_FALSE(spec->plan.step_in_backward);
  spec = ParseJobSpecText(job + "plan: {step_in_backward: true}\n", "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_TRUE(spec->plan.step_in_backward);
  for (const auto& [text, reason] : std::vector<std::pair<std::string, std::string>>{
           {"plan: {step_in_backward: true, microbatch: 4}\n", "false with 2 accumulation steps"},
           {"plan: {step_in_backward: true, optimizer_state: host}\n", "optimizer_state: host"},
           {"plan: {step_in_backward: true, precision: fp16}\n", "precision fp16"},
           {"plan: {step_in_backward: true}\ndistributed: {ranks: 2}\n",
            "distributed.ranks above 1"},
           {"plan: {step_in_backward: yes please}\n", "plan.step_in_backward"}}) {
    spec = ParseJobSpecText(job + text, "job.yaml");
    ASSERT_FALSE(spec.ok()) << text;
    EXPECT_NE(spec.status().message().find("plan.step_in_backward"), std::string::npos)
        << spec.status().message();
    EXPECT_NE(spec.status().message().find(reason), std::string::npos) << spec.status().message();
  }
}

// Activations moved to host memory free the device only where the host is apart from it.
TEST(JobSpecParserTest, ActivationsOnTheHostOnlyWhereTheHostIsNotTheDevice) {
  const std::string plan = "plan: {offload_activations: true}\n";
  Result<JobSpec> spec = ParseJobSpecText(
      std::string(kMinimal) + plan + "memory: {simulated_device: true}\n", "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_TRUE(spec->plan.offload_activations);
  spec = ParseJobSpecText(std::string(kMinimal) + plan + "runtime: {device: cuda}\n", "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_TRUE(spec->plan.offload_activations);
  spec = ParseJobSpecText(std::string(kMinimal) + plan, "job.yaml");
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.status().message().find("plan.offload_activations"), std::string::npos)
      << spec.status().message();
  EXPECT_NE(spec.status().message().find("the host is the device"), std::string::npos)
      << spec.status().message();
}

TEST(JobSpecParserTest, FinetuneReadsAdaptersAndRefusesTheirKeysWithFullTraining) {
  Result<JobSpec> spec = ParseJobSpecText(
      std::string(kMinimal) +
          "finetune: {method: lora, rank: 16, alpha: 32, dropout: 5%, targets: [qkv, mlp.0]}\n",
      "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->finetune.method, FinetuneMethod::kLora);
  EXPECT_EQ(spec->finetune.rank, 16);
  EXPECT_EQ(spec->finetune.alpha, 32);
  EXPECT_DOUBLE_EQ(spec->finetune.dropout, 0.05);
  EXPECT_EQ(spec->finetune.targets, (std::vector<std::string>{"qkv", "mlp.0"}));
  EXPECT_EQ(ParseJobSpecText(kMinimal, "job.yaml")->finetune.method, FinetuneMethod::kFull);

  EXPECT_NE(ErrorOf(std::string(kMinimal) + "finetune: {method: lora}\n")
                .find("finetune.targets: expected the names of the linear layers to adapt"),
            std::string::npos);
  EXPECT_NE(ErrorOf(std::string(kMinimal) + "finetune: {method: full, rank: 4}\n")
                .find("finetune.rank: expected nothing with method: full"),
            std::string::npos);
  EXPECT_NE(ErrorOf(std::string(kMinimal) + "finetune: {method: lora, rank: 0, targets: [qkv]}\n")
                .find("finetune.rank: expected an integer in [1, 65536]"),
            std::string::npos);
  EXPECT_NE(ErrorOf(std::string(kMinimal) + "finetune: {method: qlora}\n")
                .find("finetune.method: expected one of full lora, got 'qlora'"),
            std::string::npos);
}

TEST(JobSpecParserTest, AZeroStageNeedsRanksAndTheOptimizerStateOnTheDevice) {
  EXPECT_NE(ErrorOf(std::string(kMinimal) + "plan: {zero_stage: 1}\n")
                .find("plan.zero_stage: expected 0 with distributed.ranks 1 (ZeRO shards the "
                      "model's state over data-parallel ranks), got 1"),
            std::string::npos);
  EXPECT_NE(ErrorOf(std::string(kMinimal) +
                    "distributed: {ranks: 2}\nplan: {zero_stage: 2, optimizer_state: host}\n")
                .find("plan.zero_stage: expected 0 with optimizer_state: host"),
            std::string::npos);
  EXPECT_NE(ErrorOf(std::string(kMinimal) + "distributed: {ranks: 2}\nplan: {zero_stage: 3}\n")
                .find("plan.zero_stage: expected an integer in [0, 2]"),
            std::string::npos);
  EXPECT_NE(ErrorOf(std::string(kMinimal) + "planner: {zero_stages: [1, 2]}\n")
                .find("planner.zero_stages: expected a list that includes 0"),
            std::string::npos);
  Result<JobSpec> spec =
      ParseJobSpecText(std::string(kMinimal) + "planner: {zero_stages: [0, 2]}\n", "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->planner.zero_stages, (std::vector<int>{0, 2}));
  EXPECT_EQ(ParseJobSpecText(kMinimal, "job.yaml")->planner.zero_stages, (std::vector<int>{0, 1}));
}

TEST(JobSpecParserTest, InconsistentPlansAreRejected) {
  EXPECT_NE(
      ErrorOf(std::string(kMinimal) +
              "training: {effective_batch: 32}\nplan: {microbatch: 8, accumulation_steps: 3}\n")
          .find("plan.accumulation_steps: expected 4 (effective batch 32 in microbatches of 8), "
                "got 3"),
      std::string::npos);
  EXPECT_NE(
      ErrorOf(std::string(kMinimal) + "plan: {checkpoint_blocks: [2]}\n")
          .find("plan.checkpoint_blocks: expected all or none or a list of integers in [0, 1]"),
      std::string::npos);
  EXPECT_NE(ErrorOf(std::string(kMinimal) + "plan: {precision: fp8}\n")
                .find("plan.precision: expected one of fp32 bf16 fp16, got 'fp8'"),
            std::string::npos);
  EXPECT_NE(ErrorOf(std::string(kMinimal) + "planner: {optimizer_states: [host]}\n")
                .find("planner.optimizer_states: expected a list that includes device"),
            std::string::npos);
  EXPECT_NE(ErrorOf(std::string(kMinimal) + "plan: {optimizer_state: cpu}\n")
                .find("plan.optimizer_state: expected one of device host, got 'cpu'"),
            std::string::npos);
}

}  // namespace
}  // namespace trainerd

namespace trainerd {
namespace {

TEST(JobSpecParserTest, DistributedSectionAndItsErrors) {
  Result<JobSpec> spec = ParseJobSpecText(std::string(kMinimal) +
                                              "training: {effective_batch: 10}\n"
                                              "distributed: {ranks: 4, launcher: slurm, timeout: "
                                              "2m, launcher_args: [--gpus-per-task=1]}\n"
                                              "plan: {microbatch: 3}\n",
                                          "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->distributed.ranks, 4);
  EXPECT_EQ(spec->distributed.launcher, Launcher::kSlurm);
  EXPECT_DOUBLE_EQ(spec->distributed.timeout_seconds, 120);
  EXPECT_EQ(spec->distributed.launcher_args, std::vector<std::string>{"--gpus-per-task=1"});
  EXPECT_EQ(spec->plan.accumulation_steps, 1);  // a rank's largest share is 3 of 10
  EXPECT_EQ(RankJob(*spec).training.effective_batch, 3);

  const std::string base = std::string(kMinimal) + "training: {effective_batch: 4}\n";
  EXPECT_NE(ErrorOf(base + "distributed: {ranks: 5}\n")
                .find("job.yaml:9: distributed.ranks: expected at most "
                      "training.effective_batch (4): every rank needs a sample, got 5"),
            std::string::npos);
  EXPECT_NE(ErrorOf(base + "distributed: {launcher: mpi}\n")
                .find("distributed.launcher: expected one of local torchrun slurm, got 'mpi'"),
            std::string::npos);
  EXPECT_NE(ErrorOf(base + "distributed: {launcher_path: /usr/bin/srun}\n")
                .find("distributed.launcher_path: expected nothing with launcher: local"),
            std::string::npos);
  EXPECT_NE(ErrorOf(base + "distributed: {timeout: 0s}\n").find("distributed.timeout"),
            std::string::npos);
}

}  // namespace
}  // namespace trainerd
