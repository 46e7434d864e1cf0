// A model kind that exists only in this file: its keys registered with the job spec
// (spec/model_kind.h), its model with the model registry (models/model_registry.h), exactly as
// the built-in kinds and plugins register theirs. Nothing else in the tree names it, yet a job
// of it parses, resolves, trains, is planned and passes parity, and its options are its
// identity: what the seams are for (docs/extending.md).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>

#include "../support/recording_sink.h"
#include "../support/temp_dir.h"
#include "../support/tiny_job.h"
#include "trainerd/trainer/data/dataset.h"
#include "trainerd/trainer/loop/trainer.h"
#include "trainerd/trainer/models/model_registry.h"
#include "trainerd/trainer/models/resolve_model.h"
#include "trainerd/trainer/plan/parity.h"
#include "trainerd/trainer/plan/planner.h"
#include "trainerd/trainer/spec/job_identity.h"
#include "trainerd/trainer/spec/job_spec_parser.h"
#include "trainerd/trainer/spec/model_kind.h"

namespace trainerd {
namespace {

constexpr char kKind[] = "test_residual_lm";

// The kind's keys: `width` and `blocks`, both required to be positive.
class ResidualLmKind : public ModelKind {
 public:
  void Read(YamlReader& model, const ModelKeysContext& /*context*/,
            ModelSpec* spec) const override {
    int width = 16, blocks = 2;
    model.Int("width", &width, 1, 4096);
    model.Int("blocks", &blocks, 1, 64);
    spec->options = {{"width", width}, {"blocks", blocks}};
    spec->inputs = ModelInputs::kTokens;
  }
  std::optional<int> DeclaredBlocks(const ModelSpec& spec) const override {
    return spec.options.value("blocks", 2);
  }
  std::optional<bool> DeclaredBatchStatistics(const ModelSpec& /*spec*/) const override {
    return false;
  }
};
TRAINERD_REGISTER_MODEL_KIND(kKind, ResidualLmKind);

// Byte embeddings, `blocks` residual GELU layers run through RunBlock, a 256-way head.
class ResidualLm : public TrainableModel {
 public:
  ResidualLm(int width, int blocks) {
    embedding_ = register_module("embedding", torch::nn::Embedding(256, width));
    for (int i = 0; i < blocks; ++i) {
      blocks_.push_back(
          register_module("block" + std::to_string(i), torch::nn::Linear(width, width)));
    }
    head_ = register_module("head", torch::nn::Linear(width, 256));
  }
  torch::Tensor forward(const torch::Tensor& tokens) override {
    torch::Tensor x = embedding_->forward(tokens);
    for (int i = 0; i < num_blocks(); ++i) {
      torch::nn::Linear& layer = blocks_[static_cast<std::size_t>(i)];
      x = RunBlock(
          i,
          [layer](const torch::Tensor& in) mutable { return in + torch::gelu(layer->forward(in)); },
          layer->parameters(), {}, x);
    }
    return head_->forward(x);
  }
  SampleFormat sample_format() const override { return SampleFormat::kNextToken; }
  int num_blocks() const override { return static_cast<int>(blocks_.size()); }
  bool has_batch_statistics() const override { return false; }

 private:
  torch::nn::Embedding embedding_{nullptr};
  std::vector<torch::nn::Linear> blocks_;
  torch::nn::Linear head_{nullptr};
};
TRAINERD_REGISTER_MODEL(kKind, [](const ModelContext& context) {
  return std::make_shared<ResidualLm>(context.options.at("width").get<int>(),
                                      context.options.at("blocks").get<int>());
});

class TestOnlyModelKindTest : public ::testing::Test {
 protected:
  // The tiny job's data and schedule with a model of this kind.
  JobSpec Job(int width = 24) {
    const std::string yaml = testing::TinyGptYaml(30);
    const std::string job = "model: {kind: " + std::string(kKind) +
                            ", width: " + std::to_string(width) + ", blocks: 3, block_size: 32}\n" +
                            yaml.substr(yaml.find('\n') + 1);
    Result<JobSpec> spec = ParseJobSpecText(job, dir_.File("job.yaml"));
    EXPECT_TRUE(spec.ok()) << spec.status().message();
    return spec.ok() ? *spec : JobSpec{};
  }
  // `spec` resolved against its data, as trainer-run does.
  void Resolve(JobSpec* spec) {
    Result<std::unique_ptr<Dataset>> data = LoadDataset(spec->data, spec->model.block_size, "");
    ASSERT_TRUE(data.ok()) << data.status().message();
    data_ = std::move(*data);
    const Status resolved = ResolveModel(spec, *data_);
    ASSERT_TRUE(resolved.ok()) << resolved.message();
    const Status fits = CheckModelFitsData(spec->model, spec->source_path, *data_);
    ASSERT_TRUE(fits.ok()) << fits.message();
  }

  testing::TempDir dir_;
  std::unique_ptr<Dataset> data_;
};

TEST_F(TestOnlyModelKindTest, ParsesResolvesAndIsWhatItsKeysSay) {
  JobSpec spec = Job();
  EXPECT_EQ(spec.model.kind, kKind);
  EXPECT_EQ(NumBlocks(spec.model), 3);  // declared by its keys, before anything is built
  ASSERT_NO_FATAL_FAILURE(Resolve(&spec));
  ASSERT_TRUE(spec.model.loaded.has_value());
  EXPECT_EQ(spec.model.loaded->blocks, 3);
  EXPECT_EQ(spec.model.loaded->output_size, 256);  // run on a sample: its outputs are logits
  // It does not count its own FLOPs: the count over a forward's matrix products stands in.
  ASSERT_TRUE(spec.model.loaded->counted_flops_per_sample.has_value())
      << spec.model.loaded->flops_unknown_reason;
  EXPECT_GT(*spec.model.loaded->counted_flops_per_sample, 0);
  // A key of its own is checked as every key is.
  const Result<JobSpec> bad = ParseJobSpecText(
      "model: {kind: " + std::string(kKind) + ", width: 0}\ndata: {files: [a]}\n", "job.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("model.width: expected an integer in [1, 4096], got '0'"),
            std::string::npos)
      << bad.status().message();
}

TEST_F(TestOnlyModelKindTest, TrainsAndWritesItsKindAndKeysIntoTheModelDescription) {
  JobSpec spec = Job();
  spec.training.updates = 4;
  ASSERT_NO_FATAL_FAILURE(Resolve(&spec));
  testing::RecordingSink sink;
  Trainer trainer(spec, *data_, &sink);
  TrainerOptions options;
  options.checkpoint_path = dir_.File("checkpoint.pt");
  options.model_path = dir_.File("model.pt");
  Result<TrainOutcome> outcome = trainer.Run(options);
  ASSERT_TRUE(outcome.ok()) << outcome.status().message();
  EXPECT_EQ(outcome->kind, TrainOutcome::Kind::kFinished);
  const std::vector<nlohmann::json> updates = sink.Of("update");
  ASSERT_EQ(updates.size(), 4u);
  EXPECT_LT(updates.back()["loss"].get<double>(), updates.front()["loss"].get<double>());
  EXPECT_EQ(sink.Of("start").at(0)["model"]["kind"], kKind);
  EXPECT_FALSE(sink.Of("finish").at(0)["mfu"].is_null());  // counted FLOPs give an MFU
  std::ifstream described(dir_.File("model.json"));
  const nlohmann::json about = nlohmann::json::parse(described);
  EXPECT_EQ(about["model"]["kind"], kKind);
  EXPECT_EQ(about["model"]["width"], 24);
  EXPECT_EQ(about["model"]["blocks"], 3);
}

TEST_F(TestOnlyModelKindTest, IsPlannedAndAnAccumulatedCheckpointedPlanPassesParity) {
  JobSpec spec = Job();
  ASSERT_NO_FATAL_FAILURE(Resolve(&spec));
  spec.planner.probe_microbatches = {1, 2};
  spec.memory.budget_bytes = 1LL << 30;
  Result<ChosenPlan> chosen = PlanJob(spec, *data_);
  ASSERT_TRUE(chosen.ok()) << chosen.status().message();
  EXPECT_TRUE(chosen->fits_memory);

  spec.plan = {2, 4, {0, 2}, Precision::kFp32};
  Result<ParityReport> parity = CheckParity(spec, *data_, 3);
  ASSERT_TRUE(parity.ok()) << parity.status().message();
  EXPECT_TRUE(parity->pass) << ToJson(*parity).dump();
  // And the check can fail on it: a step per microbatch is another job.
  Result<ParityReport> faulty = CheckParity(spec, *data_, 3, TrainingFault::kStepPerMicrobatch);
  ASSERT_TRUE(faulty.ok()) << faulty.status().message();
  EXPECT_FALSE(faulty->pass);
}

// Its keys are part of the job: another width is another job, whose checkpoint no resume takes.
TEST_F(TestOnlyModelKindTest, ItsKeysAreInTheJobIdentity) {
  EXPECT_EQ(JobIdentity(Job(24), "data"), JobIdentity(Job(24), "data"));
  EXPECT_NE(JobIdentity(Job(24), "data"), JobIdentity(Job(32), "data"));
}

}  // namespace
}  // namespace trainerd
