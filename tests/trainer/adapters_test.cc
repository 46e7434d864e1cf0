// Low-rank adapters (finetune: {method: lora}; adapters.h) on the built-in GPT: a target that
// names no layer is a config error listing the layers; only the adapters train, the frozen
// base keeps its values and has neither gradients nor optimizer state, and the ledger says so;
// merging keeps the outputs and leaves the plain model; an accumulated, checkpointed adapter
// plan with dropout passes parity, and a step per microbatch fails it; a bf16 base halves the
// frozen linear weights and trains under fp32 and bf16 plans alike; an interrupted adapter job
// resumes to the uninterrupted release.
#include "trainerd/trainer/models/adapters.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <atomic>
#include <map>
#include <string>
#include <vector>

#include "../support/recording_sink.h"
#include "../support/stop_after_update.h"
#include "../support/temp_dir.h"
#include "../support/tiny_job_test.h"
#include "trainerd/trainer/loop/model_state_bytes.h"
#include "trainerd/trainer/loop/trainer.h"
#include "trainerd/trainer/models/build_model.h"
#include "trainerd/trainer/models/resolve_model.h"
#include "trainerd/trainer/plan/memory_ledger.h"
#include "trainerd/trainer/plan/parity.h"

namespace trainerd {
namespace {

class AdaptersTest : public testing::TinyJobTest {
 protected:
  JobSpec Lora(std::vector<std::string> targets, double dropout = 0,
               Precision base = Precision::kFp32) const {
    JobSpec spec = spec_;
    spec.finetune = {FinetuneMethod::kLora, /*rank=*/4, /*alpha=*/8, dropout, base,
                     std::move(targets)};
    return spec;
  }
  static std::map<std::string, torch::Tensor> Values(const torch::nn::Module& model) {
    std::map<std::string, torch::Tensor> values;
    for (const auto& p : model.named_parameters()) values[p.key()] = p.value().detach().clone();
    return values;
  }
};

TEST_F(AdaptersTest, ATargetThatNamesNoLayerIsAConfigErrorListingTheLayers) {
  JobSpec spec = Lora({"qkv", "q_proj"});
  const Status unknown = ResolveModel(&spec, *corpus_);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.message().find("tiny: finetune.targets: 'q_proj' names no layer of this "
                                   "model; the layers that take one: qkv, proj, mlp.0, mlp.2"),
            std::string::npos)
      << unknown.message();

  spec = Lora({"lm_head"});
  const Status head = ResolveModel(&spec, *corpus_);
  ASSERT_FALSE(head.ok());
  EXPECT_NE(head.message().find("'lm_head' names lm_head, which takes no adapter"),
            std::string::npos)
      << head.message();

  spec = Lora({"mlp.0", "block1.attn.qkv"});
  EXPECT_TRUE(ResolveModel(&spec, *corpus_).ok());
}

TEST_F(AdaptersTest, OnlyTheAdaptersTrainAndTheFrozenBaseHasNoGradientOrState) {
  NullEventSink discard;
  Trainer trainer(Lora({"qkv", "mlp.0"}, /*dropout=*/0.1), *corpus_, &discard);
  const std::map<std::string, torch::Tensor> before = Values(trainer.model());
  for (int update = 0; update < 3; ++update) trainer.TrainUpdate(update);

  std::int64_t adapter_bytes = 0;
  int adapters = 0;
  for (const auto& p : trainer.model().named_parameters()) {
    const bool adapter = p.key().find(".lora_") != std::string::npos;
    if (adapter) {
      ++adapters;
      adapter_bytes += p.value().numel() * p.value().element_size();
      EXPECT_FALSE(torch::equal(p.value(), before.at(p.key()))) << p.key() << " did not train";
      EXPECT_TRUE(p.value().grad().defined()) << p.key();
    } else {
      EXPECT_TRUE(torch::equal(p.value(), before.at(p.key()))) << p.key() << " changed";
      EXPECT_FALSE(p.value().grad().defined()) << p.key() << " has a gradient";
    }
  }
  EXPECT_EQ(adapters, 2 * 2 * 2) << "lora_A and lora_B on two layers of two blocks";
  EXPECT_EQ(GradientBytes(trainer.model()), adapter_bytes);
  // AdamW's two moments of the adapters, and nothing of the base.
  EXPECT_EQ(AdamWStateBytes(trainer.model_state().optimizer()), 2 * adapter_bytes);

  const Result<MemoryLedger> ledger = MeasureLedger(Lora({"qkv", "mlp.0"}), *corpus_);
  ASSERT_TRUE(ledger.ok()) << ledger.status().message();
  EXPECT_EQ(ledger->parameters_bytes - ledger->frozen_parameters_bytes, adapter_bytes);
  EXPECT_EQ(ledger->gradients_bytes, adapter_bytes);
  EXPECT_EQ(ledger->optimizer_state_bytes, 2 * adapter_bytes);
  EXPECT_NE(LedgerTable(*ledger).find("of them frozen"), std::string::npos);
}

TEST_F(AdaptersTest, MergingKeepsTheOutputsAndLeavesThePlainModel) {
  NullEventSink discard;
  Trainer trainer(Lora({"qkv", "proj", "mlp.2"}), *corpus_, &discard);
  for (int update = 0; update < 4; ++update) trainer.TrainUpdate(update);
  TrainableModel& model = trainer.model();
  model.eval();
  const torch::Tensor tokens = torch::randint(0, 256, {2, 32}, torch::kLong);
  const torch::Tensor adapted = model.forward(tokens).detach();
  EXPECT_EQ(AdapterTensors(model).size(), 2u * 3u * 2u);
  MergeAdapters(&model);
  EXPECT_TRUE(AdapterTensors(model).empty());
  const torch::Tensor merged = model.forward(tokens).detach();
  EXPECT_LE((merged - adapted).abs().max().item<double>(), 1e-5);

  // The plain model's tensors by the plain model's names, each trainable again.
  std::shared_ptr<TrainableModel> plain = BuildModel(spec_.model, 0, "tiny");
  std::vector<std::string> plain_names, merged_names;
  for (const auto& [name, tensor] : plain->StateDict()) plain_names.push_back(name);
  for (const auto& [name, tensor] : model.StateDict()) merged_names.push_back(name);
  EXPECT_EQ(merged_names, plain_names);
  EXPECT_EQ(CountTrainableParameters(model), CountParameters(*plain));
}

TEST_F(AdaptersTest, AnAccumulatedCheckpointedAdapterPlanPassesParityAndAStepPerMicrobatchFails) {
  JobSpec spec = Lora({"qkv", "proj"}, /*dropout=*/0.1);
  spec.plan.microbatch = 2;
  spec.plan.accumulation_steps = 4;
  spec.plan.checkpoint_blocks = {0, 1};
  const Result<ParityReport> correct = CheckParity(spec, *corpus_, 3);
  ASSERT_TRUE(correct.ok()) << correct.status().message();
  EXPECT_TRUE(correct->pass) << ToJson(*correct).dump();
  const Result<ParityReport> faulty =
      CheckParity(spec, *corpus_, 3, TrainingFault::kStepPerMicrobatch);
  ASSERT_TRUE(faulty.ok()) << faulty.status().message();
  EXPECT_FALSE(faulty->pass);
}

// finetune.base_dtype: bf16 stores every frozen linear weight in bf16: the ledger's frozen
// bytes fall by 2 per such weight, an fp32 plan and a bf16 plan (its optimizer state on the
// host) both train with them, parity passes, and the merged release is fp32 and computes what
// the adapted model did.
TEST_F(AdaptersTest, ABf16BaseHalvesTheFrozenLinearWeightsAndEveryPlanTrainsWithThem) {
  JobSpec wide = Lora({"qkv", "mlp.0"});
  JobSpec narrow = Lora({"qkv", "mlp.0"}, /*dropout=*/0.1, Precision::kBf16);
  // Without biases here, with them below: the widened product takes both.
  narrow.model.options["bias"] = false;
  wide.model.options["bias"] = false;
  const Result<MemoryLedger> wide_ledger = MeasureLedger(wide, *corpus_);
  const Result<MemoryLedger> narrow_ledger = MeasureLedger(narrow, *corpus_);
  ASSERT_TRUE(wide_ledger.ok() && narrow_ledger.ok());
  // 2 blocks x (qkv 32 x 96 + proj 32 x 32 + mlp 32 x 128 + 128 x 32) weights, 2 bytes less each.
  const std::int64_t linear_weights = 2 * (32 * 96 + 32 * 32 + 32 * 128 + 128 * 32);
  EXPECT_EQ(wide_ledger->frozen_parameters_bytes - narrow_ledger->frozen_parameters_bytes,
            2 * linear_weights);
  EXPECT_EQ(narrow_ledger->gradients_bytes, wide_ledger->gradients_bytes);

  // The optimizer state on the host with the second: its copies are the adapters' alone.
  for (const Precision precision : {Precision::kFp32, Precision::kBf16}) {
    JobSpec spec = narrow;
    spec.plan.precision = precision;
    if (precision == Precision::kBf16) spec.plan.optimizer_state = StatePlacement::kHost;
    spec.plan.microbatch = 2;
    spec.plan.accumulation_steps = 4;
    spec.plan.checkpoint_blocks = {1};
    const Result<ParityReport> parity = CheckParity(spec, *corpus_, 2);
    ASSERT_TRUE(parity.ok()) << parity.status().message();
    EXPECT_TRUE(parity->pass) << ToString(precision) << ": " << ToJson(*parity).dump();
  }

  NullEventSink discard;
  Trainer trainer(Lora({"qkv", "mlp.0"}, /*dropout=*/0.1, Precision::kBf16), *corpus_, &discard);
  int narrow_weights = 0;
  for (const auto& p : trainer.model().named_parameters()) {
    if (p.value().scalar_type() == torch::kBFloat16) {
      ++narrow_weights;
      EXPECT_TRUE(p.key().ends_with(".weight")) << p.key();
    }
  }
  EXPECT_EQ(narrow_weights, 2 * 4) << "every linear layer's weight but the head's";
  for (int update = 0; update < 3; ++update) trainer.TrainUpdate(update);
  TrainableModel& model = trainer.model();
  model.eval();
  const torch::Tensor tokens = torch::randint(0, 256, {2, 32}, torch::kLong);
  const torch::Tensor adapted = model.forward(tokens).detach();
  MergeAdapters(&model);
  for (const auto& p : model.named_parameters()) {
    EXPECT_EQ(p.value().scalar_type(), torch::kFloat) << p.key();
  }
  EXPECT_LE((model.forward(tokens).detach() - adapted).abs().max().item<double>(), 1e-5);
}

// An adapter job on a bf16 base interrupted after 2 of 4 updates and resumed from its
// checkpoint (the adapters, their AdamW state and the bf16 base) releases the model an
// uninterrupted run releases, bit for bit.
TEST_F(AdaptersTest, AnInterruptedAdapterJobResumesToTheUninterruptedRelease) {
  JobSpec spec = Lora({"qkv", "mlp.2"}, /*dropout=*/0.1, Precision::kBf16);
  spec.training.updates = 4;
  const auto released = [&](const std::string& dir, int stop_after) {
    TrainerOptions options;
    options.checkpoint_path = dir + "/checkpoint.pt";
    options.model_path = dir + "/model.pt";
    std::atomic<bool> stop{false};
    options.stop_requested = &stop;
    if (stop_after > 0) {
      testing::StopAfterUpdate sink(stop_after, &stop);
      Trainer first(spec, *corpus_, &sink);
      const Result<TrainOutcome> interrupted = first.Run(options);
      EXPECT_TRUE(interrupted.ok() && interrupted->kind == TrainOutcome::Kind::kInterrupted);
      stop = false;
      options.resume = Resume::kRequired;
    }
    testing::RecordingSink sink;
    Trainer trainer(spec, *corpus_, &sink);
    const Result<TrainOutcome> outcome = trainer.Run(options);
    EXPECT_TRUE(outcome.ok() && outcome->kind == TrainOutcome::Kind::kFinished);
    EXPECT_EQ(sink.Of("update").size(), static_cast<std::size_t>(4 - stop_after))
        << "the resumed run trains only the updates after its checkpoint";
    return Values(trainer.model());
  };
  testing::TempDir straight, resumed;
  const std::map<std::string, torch::Tensor> want = released(straight.path().string(), 0);
  const std::map<std::string, torch::Tensor> got = released(resumed.path().string(), 2);
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, tensor] : want) {
    EXPECT_TRUE(torch::equal(got.at(name), tensor)) << name;
  }
}

}  // namespace
}  // namespace trainerd
